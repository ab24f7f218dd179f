package client

import "context"

type traceKey struct{}

// WithTrace returns ctx carrying a W3C trace context: every request
// made with it sends it as the traceparent and tracestate headers, so the
// server's spans (and a task enqueued with it) join that trace. Work
// gives each handler's context its task's trace, so the run's heartbeats,
// records and submit continue its producer's trace.
func WithTrace(ctx context.Context, t *Trace) context.Context {
	if t == nil || t.Traceparent == "" {
		return ctx
	}
	return context.WithValue(ctx, traceKey{}, t)
}

// TraceFrom is the trace context WithTrace put in ctx; nil for none.
func TraceFrom(ctx context.Context) *Trace {
	t, _ := ctx.Value(traceKey{}).(*Trace)
	return t
}
