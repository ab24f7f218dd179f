// Package telemetry owns the server's traces (issue 43): it sets up the
// OpenTelemetry SDK and its OTLP/HTTP exporter when one is configured, and
// names the tracer every span of the server comes from. With none
// configured nothing is set up: the global tracer provider stays
// OpenTelemetry's no-op one, and a span costs a call that returns at once.
package telemetry

import (
	"context"
	"fmt"
	"os"
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
// sampler follows the caller's decision and samples every new trace.
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
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	on.Store(true)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}))
	return tp.Shutdown, true, nil
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
