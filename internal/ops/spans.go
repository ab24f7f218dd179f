package ops

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/telemetry"
)

// requestSpan gives one call its span (issue 43). Over HTTP the request's
// span is OpenTelemetry's HTTP instrumentation's, named by the route's
// template (httpapi): the call adds what it was to it. An MCP tool call
// gets a span of its own under the POST /mcp request's ("tools/call
// enqueue_task", as the MCP semantic conventions name it); so does a call
// with no request span around it, as a child of the caller's trace
// context when it sent one. No attribute holds a key, a token or a
// payload. own says whether the span is the call's to end.
func requestSpan(ctx context.Context, op *Op, r Request) (_ context.Context, span trace.Span, own bool) {
	if cur := trace.SpanFromContext(ctx); r.Transport == "http" && cur.SpanContext().IsValid() {
		// The request's own span, sampled or not: a call in a trace that
		// is not sampled starts nothing more.
		if cur.IsRecording() {
			cur.SetAttributes(attribute.String("tessera.op", op.Name), attribute.String("tessera.namespace", r.NS))
		}
		return ctx, cur, false
	}
	attrs := []attribute.KeyValue{attribute.String("tessera.op", op.Name), attribute.String("tessera.namespace", r.NS)}
	if t := r.Trace; t != nil && !trace.SpanContextFromContext(ctx).IsValid() {
		if sc := telemetry.Remote(t.Traceparent, t.Tracestate); sc.IsValid() {
			ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
		}
	}
	name := op.Name
	switch {
	case r.Transport == "mcp" && op.Tool != nil:
		name = "tools/call " + op.Tool.Name
		attrs = append(attrs, attribute.String("mcp.method.name", "tools/call"), attribute.String("gen_ai.tool.name", op.Tool.Name))
	case op.HTTP != nil:
		name = op.HTTP.Method + " " + op.HTTP.Path
		attrs = append(attrs, attribute.String("http.request.method", op.HTTP.Method), attribute.String("http.route", op.HTTP.Path))
	}
	ctx, span = telemetry.Tracer().Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	return ctx, span, true
}

// traced is p in the call's trace context unless it names its own: the
// call's span when one is exported (so the task's grants and runs hang
// under the enqueue's span), else the caller's.
func (c *Call) traced(ctx context.Context, p core.EnqueueParams) core.EnqueueParams {
	if p.Trace != nil {
		return p
	}
	p.Trace = c.Trace
	if telemetry.Enabled(ctx) {
		if tp, ts := telemetry.Traceparent(ctx); tp != "" {
			p.Trace = &core.Trace{Traceparent: tp, Tracestate: ts}
		}
	}
	return p
}

// endRequestSpan records how the call ended, and ends the span when it
// is the call's own.
func endRequestSpan(span trace.Span, own bool, res *Result, code string) {
	if res.Err != nil {
		span.SetAttributes(attribute.String("error.type", code))
	}
	if !own {
		return // the HTTP instrumentation records the status and ends it
	}
	if res.Err != nil && res.Status >= 500 && res.Status != StatusClientClosed {
		span.SetStatus(codes.Error, code)
	}
	span.End()
}
