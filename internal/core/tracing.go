package core

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/tessera-dev/tessera/internal/telemetry"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// Spans of the core (issue 43), made only while the request's own span
// is exported: a store transaction and a long-poll's wait as children of
// the request's span; and, for a task, its grant and each run as children
// of the trace context it was enqueued in, linked to the request that
// granted or ended it. A run's span is made when the run ends — its
// start is the claim's time, kept with the run — so no node holds a span
// open across requests, and the node that ends a run (a submit, or a
// claim that notices a lapse) reports it whole.

// storeSpan starts a store transaction's span under ctx's, when ctx's is
// exported.
func storeSpan(ctx context.Context, name string) (context.Context, trace.Span) {
	if !telemetry.Enabled(ctx) {
		return ctx, trace.SpanFromContext(ctx)
	}
	return telemetry.Tracer().Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient))
}

// endSpan ends a span started by storeSpan (not ctx's own, which it
// returns when nothing was started).
func endSpan(span trace.Span, err error) {
	if !span.IsRecording() {
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, string(tessera.ErrorCode(err)))
	}
	span.End()
}

// waitSpan times a long-poll's wait under ctx's span.
func waitSpan(ctx context.Context, name string) func() {
	if !telemetry.Enabled(ctx) {
		return func() {}
	}
	_, span := telemetry.Tracer().Start(ctx, name)
	return func() { span.End() }
}

// taskContext is the context of the trace task was enqueued in, linked
// to ctx's span; a new trace for a task enqueued in none.
func taskContext(ctx context.Context, task *tessera.Task) (context.Context, trace.SpanStartOption) {
	link := trace.WithLinks(trace.LinkFromContext(ctx, attribute.String("tessera.link", "request")))
	parent := context.Background()
	if t := task.Trace; t != nil {
		if sc := telemetry.Remote(t.Traceparent, t.Tracestate); sc.IsValid() {
			parent = trace.ContextWithRemoteSpanContext(parent, sc)
		}
	}
	return parent, link
}

func taskAttributes(task *tessera.Task) []attribute.KeyValue {
	return []attribute.KeyValue{attribute.String("tessera.namespace", task.Namespace), attribute.String("tessera.queue", task.Queue),
		attribute.String("tessera.task.id", task.ID)}
}

// grantSpan reports a task's claim in the task's trace: from the claim's
// time to its commit.
func grantSpan(ctx context.Context, task *tessera.Task) {
	parent, link := taskContext(ctx, task)
	attrs := taskAttributes(task)
	if task.Lease != nil {
		attrs = append(attrs, attribute.String("tessera.run.id", task.Lease.RunID), attribute.Int("tessera.run.attempt", task.Attempts))
	}
	opts := []trace.SpanStartOption{link, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...)}
	if task.Run != nil {
		opts = append(opts, trace.WithTimestamp(task.Run.StartedAt)) // the claim's time, as the run's span starts
	}
	_, span := telemetry.Tracer().Start(parent, "tessera.claim "+task.Queue, opts...)
	span.End()
}

// runSpan reports a run that ended, from its claim to its end, in its
// task's trace.
func runSpan(ctx context.Context, task *tessera.Task) {
	r := task.Run
	parent, link := taskContext(ctx, task)
	attrs := append(taskAttributes(task), attribute.String("tessera.run.id", r.ID), attribute.Int("tessera.run.attempt", r.Attempt),
		attribute.String("tessera.run.outcome", r.Outcome), attribute.String("tessera.task.state", task.State))
	_, span := telemetry.Tracer().Start(parent, "tessera.run "+task.Queue, link, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithTimestamp(r.StartedAt), trace.WithAttributes(attrs...))
	if r.Outcome != tessera.OutcomeSucceeded {
		span.SetStatus(codes.Error, r.Outcome)
	}
	end := time.Now()
	if r.EndedAt != nil {
		end = *r.EndedAt
	}
	span.End(trace.WithTimestamp(end))
}
