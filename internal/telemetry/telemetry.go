// Package telemetry owns the server's traces (issue 43): it sets up the
// OpenTelemetry SDK and its OTLP/HTTP exporter when one is configured, and
// names the tracer every span of the server comes from. With none
// configured nothing is set up: the global tracer provider stays
// OpenTelemetry's no-op one, and a span costs a call that returns at once.
package telemetry

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Tracer is where the server's spans come from.
func Tracer() trace.Tracer { return otel.Tracer("github.com/tessera-dev/tessera") }

// on is set once Setup has installed an exporting provider.
var on atomic.Bool

// On reports whether spans are exported at all: with it false, a request
// starts no span and builds no attribute.
func On() bool { return on.Load() }

// Enabled reports whether spans are exported: a cheap check for work
// done only to decorate a span.
func Enabled(ctx context.Context) bool { return trace.SpanFromContext(ctx).IsRecording() }

// Setup exports spans over OTLP/HTTP to endpoint (a base URL, e.g.
// http://collector:4318), or where OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT say when endpoint is empty; with
// neither it sets nothing up and reports false. The exporter and the
// sampler read the standard OTEL_* variables (OTEL_SERVICE_NAME,
// OTEL_TRACES_SAMPLER and its _ARG, headers, timeouts); the default
// sampler follows the caller's decision and samples every new trace. An
// unknown sampler is an error.
// shutdown flushes what is buffered.
func Setup(ctx context.Context, endpoint, version string) (shutdown func(context.Context) error, enabled bool, err error) {
	none := func(context.Context) error { return nil }
	if endpoint == "" && os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return none, false, nil
	}
	var opts []otlptracehttp.Option
	if endpoint != "" {
		opts = append(opts, otlptracehttp.WithEndpointURL(endpoint+"/v1/traces"))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return none, false, fmt.Errorf("telemetry: the OTLP exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		attribute.String("service.version", version)))
	if err != nil {
		return none, false, fmt.Errorf("telemetry: %w", err)
	}
	if os.Getenv("OTEL_SERVICE_NAME") == "" {
		res, _ = resource.Merge(res, resource.NewSchemaless(attribute.String("service.name", "tessera")))
	}
	smp, err := samplerFromEnv()
	if err != nil {
		return none, false, err
	}
	sampler = smp
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res),
		sdktrace.WithSampler(smp), sdktrace.WithIDGenerator(edgeIDs{}))
	otel.SetTracerProvider(tp)
	on.Store(true)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}))
	return tp.Shutdown, true, nil
}

// sampler is the one Setup configured; Sample asks it first.
var sampler sdktrace.Sampler

// samplerFromEnv is the sampler OTEL_TRACES_SAMPLER and its _ARG name,
// read here rather than left to the SDK so that Sample can ask it before
// the HTTP instrumentation builds anything. These are the SDK's values;
// an _ARG that is no ratio is 1, as the SDK has it.
func samplerFromEnv() (sdktrace.Sampler, error) {
	ratio := 1.0
	if arg := os.Getenv("OTEL_TRACES_SAMPLER_ARG"); arg != "" {
		if f, err := strconv.ParseFloat(arg, 64); err == nil && f >= 0 && f <= 1 {
			ratio = f
		}
	}
	switch name := os.Getenv("OTEL_TRACES_SAMPLER"); name {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio)), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(ratio), nil
	default:
		return nil, fmt.Errorf("telemetry: OTEL_TRACES_SAMPLER=%q: want always_on, always_off, traceidratio or parentbased_ one of them", name)
	}
}

// Sample decides a request's sampling from its headers before anything
// is built for its span. Sampled, it returns ctx for the HTTP
// instrumentation to start the request's span in (for a new trace, with
// the trace id the decision was made on: edgeIDs gives it to the span,
// so the sampler, asked again there, decides the same). Not sampled, ctx
// carries the span context the request's calls follow — the caller's, or
// a new one not sampled — so none of them starts a span either.
func Sample(ctx context.Context, h http.Header) (_ context.Context, sampled bool) {
	in := otel.GetTextMapPropagator().Extract(ctx, propagation.HeaderCarrier(h))
	parent := trace.SpanContextFromContext(in)
	id := parent.TraceID()
	if !parent.IsValid() {
		id = newTraceID()
	}
	res := sampler.ShouldSample(sdktrace.SamplingParameters{ParentContext: in, TraceID: id, Kind: trace.SpanKindServer})
	switch {
	// Sampled, the instrumentation gets ctx as it came: it extracts the
	// caller's context itself, and with a span already in its request's
	// context it would start its span from that span's (no-op) provider.
	case res.Decision == sdktrace.RecordAndSample && !parent.IsValid():
		return context.WithValue(ctx, rootTraceID{}, id), true
	case res.Decision == sdktrace.RecordAndSample:
		return ctx, true
	case !parent.IsValid():
		in = trace.ContextWithSpanContext(in, trace.NewSpanContext(trace.SpanContextConfig{TraceID: id, SpanID: newSpanID()}))
	}
	return in, false
}

// rootTraceID carries the trace id Sample decided a new trace on.
type rootTraceID struct{}

// edgeIDs makes the SDK's ids: random, as its own generator's are, but a
// new trace takes the id Sample decided it on.
type edgeIDs struct{}

func (edgeIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if id, ok := ctx.Value(rootTraceID{}).(trace.TraceID); ok {
		return id, newSpanID()
	}
	return newTraceID(), newSpanID()
}

func (edgeIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return newSpanID() }

func newTraceID() (id trace.TraceID) {
	for !id.IsValid() {
		binary.NativeEndian.PutUint64(id[:8], rand.Uint64())
		binary.NativeEndian.PutUint64(id[8:], rand.Uint64())
	}
	return id
}

func newSpanID() (id trace.SpanID) {
	for !id.IsValid() {
		binary.NativeEndian.PutUint64(id[:], rand.Uint64())
	}
	return id
}

// Remote is the span context a W3C traceparent and tracestate name, to
// parent or link a span to; invalid when they name none.
func Remote(traceparent, tracestate string) trace.SpanContext {
	carrier := propagation.MapCarrier{"traceparent": traceparent, "tracestate": tracestate}
	return trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), carrier))
}

// Traceparent is the W3C traceparent and tracestate of ctx's span; empty
// when it has none.
func Traceparent(ctx context.Context) (traceparent, tracestate string) {
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	return carrier["traceparent"], carrier["tracestate"]
}
