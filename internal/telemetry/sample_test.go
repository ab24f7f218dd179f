package telemetry

import (
	"context"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// Sample decides before the HTTP instrumentation runs, and the span the
// instrumentation then starts agrees: a new trace the edge sampled is
// recorded under the trace id it was decided on (never filtered twice),
// one it did not sample leaves its calls' spans unrecorded, and a
// caller's decision is followed either way.
func TestSampleAgreesWithTheSpans(t *testing.T) {
	otel.SetTextMapPropagator(propagation.TraceContext{})
	for _, env := range []string{"parentbased_traceidratio", "traceidratio"} {
		t.Run(env, func(t *testing.T) {
			t.Setenv("OTEL_TRACES_SAMPLER", env)
			t.Setenv("OTEL_TRACES_SAMPLER_ARG", "0.25")
			smp, err := samplerFromEnv()
			if err != nil {
				t.Fatal(err)
			}
			sampler = smp
			exp := tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(smp), sdktrace.WithIDGenerator(edgeIDs{}))
			tracer := tp.Tracer("test")

			const requests = 400
			sampled := 0
			for range requests {
				ctx, ok := Sample(context.Background(), http.Header{})
				ctx, span := tracer.Start(ctx, "request", trace.WithSpanKind(trace.SpanKindServer))
				_, child := tracer.Start(ctx, "call")
				if ok {
					sampled++
					if !span.IsRecording() || !child.IsRecording() {
						t.Fatal("a request the edge sampled was not recorded")
					}
				} else if child.IsRecording() {
					t.Fatal("a call of a request the edge did not sample was recorded")
				}
				child.End()
				span.End()
			}
			// Only what the edge sampled was recorded: the request's span
			// (which the instrumentation starts only then) and its call's.
			if got := len(exp.GetSpans()); got != 2*sampled || sampled == 0 || sampled == requests {
				t.Fatalf("%d of %d requests sampled, %d spans recorded; want twice the sampled", sampled, requests, got)
			}

			// A caller's trace: a parent-based sampler follows its flag, a
			// plain ratio decides on its trace id alone.
			for _, flags := range []string{"01", "00"} {
				h := http.Header{"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-" + flags}}
				ctx, ok := Sample(context.Background(), h)
				want := flags == "01"
				if env == "traceidratio" {
					want = sampledByRatio(smp)
				}
				if ok != want {
					t.Errorf("parent flags %s: sampled %t, want %t", flags, ok, want)
				}
				if ok {
					// The instrumentation extracts the caller's context
					// itself; a span already in the request's context
					// would make it start from that span's provider.
					if trace.SpanContextFromContext(ctx).IsValid() {
						t.Errorf("parent flags %s: sampled, yet a span in the context", flags)
					}
					ctx = otel.GetTextMapPropagator().Extract(ctx, propagation.HeaderCarrier(h))
				}
				_, span := tracer.Start(ctx, "request")
				if sc := span.SpanContext(); sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || span.IsRecording() != ok {
					t.Errorf("parent flags %s: the request's span %v (recording %t), want the caller's trace, recording %t", flags, sc, span.IsRecording(), ok)
				}
				span.End()
			}
		})
	}
}

// sampledByRatio is the ratio sampler's own decision on the test's
// caller trace id, with no parent to follow.
func sampledByRatio(smp sdktrace.Sampler) bool {
	id, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	return smp.ShouldSample(sdktrace.SamplingParameters{ParentContext: context.Background(), TraceID: id}).Decision == sdktrace.RecordAndSample
}

// The sampler comes from the SDK's own variables; one the SDK does not
// know stops the start, and an _ARG that is no ratio is 1.
func TestSamplerFromEnv(t *testing.T) {
	for env, want := range map[[2]string]string{
		{"", ""}:                            "ParentBased{root:AlwaysOnSampler,remoteParentSampled:AlwaysOnSampler,remoteParentNotSampled:AlwaysOffSampler,localParentSampled:AlwaysOnSampler,localParentNotSampled:AlwaysOffSampler}",
		{"always_off", ""}:                  "AlwaysOffSampler",
		{"traceidratio", "0.1"}:             "TraceIDRatioBased{0.1}",
		{"traceidratio", "half"}:            "TraceIDRatioBased{1}",
		{"parentbased_traceidratio", "0.5"}: "ParentBased{root:TraceIDRatioBased{0.5},remoteParentSampled:AlwaysOnSampler,remoteParentNotSampled:AlwaysOffSampler,localParentSampled:AlwaysOnSampler,localParentNotSampled:AlwaysOffSampler}",
		{"jaeger_remote", ""}:               "",
	} {
		t.Setenv("OTEL_TRACES_SAMPLER", env[0])
		t.Setenv("OTEL_TRACES_SAMPLER_ARG", env[1])
		smp, err := samplerFromEnv()
		switch {
		case want == "" && env[0] != "":
			if err == nil {
				t.Errorf("%v: %s, want an error", env, smp.Description())
			}
		case err != nil || smp.Description() != want:
			t.Errorf("%v: %v %v, want %s", env, smp, err, want)
		}
	}
}
