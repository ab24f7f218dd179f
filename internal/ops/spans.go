package ops

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/telemetry"
)

// requestSpan starts the span of one call (issue 43): a child of the
// caller's trace context when it sent one, named by the route's template
// over HTTP ("POST /v1/tasks") and by the tool over MCP ("tools/call
// enqueue_task"), as the HTTP and MCP semantic conventions name them. Its
// attributes say what was called, where and how it ended; never a key, a
// token or a payload.
func requestSpan(ctx context.Context, op *Op, r Request) (context.Context, trace.Span) {
	if t := r.Trace; t != nil {
		if sc := telemetry.Remote(t.Traceparent, t.Tracestate); sc.IsValid() {
			ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
		}
	}
	attrs := []attribute.KeyValue{attribute.String("tessera.op", op.Name), attribute.String("tessera.namespace", r.NS)}
	name := op.Name
	switch {
	case r.Transport == "mcp" && op.Tool != nil:
		name = "tools/call " + op.Tool.Name
		attrs = append(attrs, attribute.String("mcp.method.name", "tools/call"), attribute.String("gen_ai.tool.name", op.Tool.Name))
	case op.HTTP != nil:
		name = op.HTTP.Method + " " + op.HTTP.Path
		attrs = append(attrs, attribute.String("http.request.method", op.HTTP.Method), attribute.String("http.route", op.HTTP.Path))
	}
	return telemetry.Tracer().Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
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

// endRequestSpan records how the call ended and ends its span.
func endRequestSpan(span trace.Span, r Request, res *Result, code string) {
	if r.Transport == "http" {
		span.SetAttributes(attribute.Int("http.response.status_code", res.Status))
	}
	if res.Err != nil {
		span.SetAttributes(attribute.String("error.type", code))
		if res.Status >= 500 && res.Status != StatusClientClosed {
			span.SetStatus(codes.Error, code)
		}
	}
	span.End()
}
