package ops

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/input"
	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/telemetry"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// Exec runs operations for the transports.
type Exec struct {
	core      *core.Service
	log       *slog.Logger
	publicURL string
	metrics   *metrics
	faults    faultLog
}

// New returns an Exec over svc. publicURL is where clients reach the
// server, for the links some answers carry.
func New(svc *core.Service, log *slog.Logger, publicURL string) *Exec {
	return &Exec{core: svc, log: log, publicURL: publicURL, metrics: newMetrics()}
}

// Core returns the service the operations run on.
func (x *Exec) Core() *core.Service { return x.core }

// Collectors are the metrics of every operation call, for a registry.
func (x *Exec) Collectors() []prometheus.Collector { return x.metrics.collectors() }

// Request is one call of an operation as a transport hands it over.
type Request struct {
	// Transport is "http" or "mcp": a label of logs and metrics.
	Transport string
	// NS is the namespace the request names (main when it names none).
	NS string
	// Keyed says the request carries a key at all: a public operation
	// without one on the main namespace looks no key up (SPEC §3.2).
	Keyed bool
	// Authenticate resolves the request's key; 401 when there is none or
	// it is bad. Called at most once, and only when the operation needs a
	// key.
	Authenticate func() (*auth.Actor, error)
	// Bind reads the operation's input into in (a pointer to its input
	// struct), held to the body limit of a's requests.
	Bind func(in any, a *auth.Actor) error
	// Body is the request's bytes, for RawBody routes.
	Body io.Reader
	// Budget, when set, is the long-poll time the calls of one request
	// share (an MCP batch).
	Budget *Budget
	// Events is where a Stream route's events go.
	Events core.EventSink
	// Trace is the caller's trace context (HTTP's traceparent and
	// tracestate headers), which an enqueue without its own trace takes.
	Trace *core.Trace
}

// Result is what a call came to.
type Result struct {
	Out   any
	Err   *tessera.Error
	Actor *auth.Actor
	// Status is the HTTP status the answer has: the route's success
	// status, the error's, or StatusClientClosed.
	Status int
	// Call is the call as it ran (nil when refused before it began).
	Call *Call
}

// Do runs one call of op: the namespace, the key (SPEC §4 step 1), the
// grant and scope (step 2), a session's request quota, the input with its
// bounds, then the core — which checks the key again before acting and
// after any wait (step 3). Every outcome is counted, measured and logged
// here once, whichever transport the call came through.
func (x *Exec) Do(ctx context.Context, op *Op, r Request) *Result {
	start := time.Now()
	ctx, usage := meter.WithUsage(ctx)
	res := &Result{}
	c := &Call{NS: r.NS, Body: r.Body, Events: r.Events, Transport: r.Transport, Trace: r.Trace, core: x.core, budget: r.Budget, PublicURL: x.publicURL}
	var span trace.Span
	var ownSpan bool
	if telemetry.On() {
		ctx, span, ownSpan = requestSpan(ctx, op, r)
	}
	err := x.run(ctx, op, r, c, res)
	elapsed := time.Since(start)
	if err == nil {
		res.Status = op.successStatus(res.Out)
	} else {
		res.Err = Fault(err)
		res.Status = Status(res.Err.Code)
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			res.Status = StatusClientClosed
		}
		x.count(op, c, res)
		x.faults.note(x.log, err, res.Err)
	}
	if r.Budget != nil {
		r.Budget.spend(elapsed)
	}
	code := res.outcome()
	x.metrics.observe(op, r.Transport, res, code, elapsed)
	level := slog.LevelInfo
	if res.Status == StatusClientClosed {
		level = slog.LevelDebug // a client that went away (a long-poll's timeout, a hang-up) is routine, not news
	}
	attrs := []slog.Attr{slog.String("op", op.Name), slog.String("transport", r.Transport),
		slog.String("namespace", input.Clip(c.NS)), slog.Int("status", res.Status), slog.String("code", code),
		slog.Int64("duration_ms", elapsed.Milliseconds()),
		slog.Int64("rows_read", usage.Read.Load()), slog.Int64("rows_written", usage.Written.Load())}
	// The call's span (or, when none is exported, the caller's), so its
	// line joins the trace in a log search.
	if span != nil {
		endRequestSpan(span, ownSpan, res, code)
		sc := span.SpanContext()
		attrs = append(attrs, slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	} else if t := c.Trace; t != nil {
		attrs = append(attrs, slog.String("trace_id", t.Traceparent[3:35]), slog.String("span_id", t.Traceparent[36:52]))
	}
	x.log.LogAttrs(ctx, level, "op", attrs...)
	return res
}

func (x *Exec) run(ctx context.Context, op *Op, r Request, c *Call, res *Result) error {
	need := op.Need()
	if !need.Keyless && !(op.Public && !r.Keyed && c.NS == tessera.MainNamespace) {
		a, err := r.Authenticate()
		if err != nil {
			return err
		}
		c.Actor, res.Actor = a, a
	}
	if !tessera.ValidNamespace(c.NS) {
		c.NS = tessera.MainNamespace // a malformed namespace names none
		return tessera.Invalid("namespace", "namespace must match %s", tessera.NamespacePattern)
	}
	if a := c.Actor; a != nil {
		if err := need.Check(a, c.NS); err != nil {
			return err
		}
		// Each call of a session key spends one of its requests, a call
		// in an MCP batch as much as an HTTP request.
		if err := x.core.SessionRequest(ctx, a); err != nil {
			return err
		}
	}
	in := op.NewInput()
	if err := r.Bind(in, c.Actor); err != nil {
		return err
	}
	if err := input.Check(in); err != nil {
		return err
	}
	res.Call = c
	out, err := op.run(ctx, c, in)
	res.Out = out
	return err
}

// successStatus is the HTTP status of a successful output.
func (op *Op) successStatus(out any) int {
	switch {
	case op.HTTP == nil:
		return 200
	case op.HTTP.Empty != nil:
		if _, empty := op.HTTP.Empty(out); empty {
			return 204
		}
	case op.HTTP.StatusOf != nil:
		return op.HTTP.StatusOf(out)
	case op.Out == nil:
		return 204
	}
	return op.HTTP.Status
}

// outcome names what a call came to in logs, metrics and counters: ok,
// the error's code, or canceled when the client went away (a 499, which
// is not the server's fault and no 5xx).
func (res *Result) outcome() string {
	switch {
	case res.Status == StatusClientClosed:
		return OutcomeCanceled
	case res.Err != nil:
		return string(res.Err.Code)
	}
	return "ok"
}

// OutcomeCanceled is the outcome of a call whose client went away.
const OutcomeCanceled = "canceled"

// count records a failed call (SPEC §9: failures are counted, never
// evented), under main when the namespace was malformed.
func (x *Exec) count(op *Op, c *Call, res *Result) {
	principal := ""
	if res.Actor != nil {
		principal = res.Actor.Principal.ID
	}
	ns := c.NS
	if !tessera.ValidNamespace(ns) {
		ns = tessera.MainNamespace // a malformed namespace names none
	}
	x.core.Count(principal, ns, op.Name, res.outcome())
}

// Budget is the long-poll time the calls of one request share: together
// they wait no longer than the longest any one of them may (a batch of
// claims, a claim's 20 s; with an events call in it, that call's 30 s),
// and never longer than the budget's cap.
type Budget struct {
	mu                  sync.Mutex
	cap, longest, spent time.Duration
}

// NewBudget returns a budget capped at d.
func NewBudget(d time.Duration) *Budget { return &Budget{cap: d} }

// allow is how long a call that may wait at most most, asking asked,
// waits now: what is left of the longest wait of the request's calls so
// far, this one's included.
func (b *Budget) allow(asked, most time.Duration) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.longest = max(b.longest, most)
	return max(min(asked, min(b.cap, b.longest)-b.spent), 0)
}

func (b *Budget) spend(d time.Duration) {
	b.mu.Lock()
	b.spent += d
	b.mu.Unlock()
}

// metrics are every operation call's, whichever transport it came
// through.
type metrics struct {
	calls     *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	claimWait *prometheus.HistogramVec
}

// latencyBuckets reach past the long-polls (claims wait up to 20 s, claim
// events 30 s).
var latencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20, 30}

func newMetrics() *metrics {
	return &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tessera_operations_total", Help: "Operation calls by operation, transport (http, mcp) and outcome (ok, or the error code; canceled when the client went away).",
		}, []string{"op", "transport", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "tessera_operation_duration_seconds", Help: "Time an operation call took, by operation and transport; long-polls included.",
			Buckets: latencyBuckets,
		}, []string{"op", "transport"}),
		claimWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "tessera_claim_wait_seconds", Help: "How long a claim waited (admission and long-poll) before it was granted or answered empty, over HTTP and MCP.",
			Buckets: latencyBuckets,
		}, []string{"outcome"}),
	}
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.calls, m.latency, m.claimWait}
}

func (m *metrics) observe(op *Op, transport string, res *Result, code string, d time.Duration) {
	m.calls.WithLabelValues(op.Name, transport, code).Inc()
	m.latency.WithLabelValues(op.Name, transport).Observe(d.Seconds())
	granted := false
	switch out := res.Out.(type) {
	case *core.Claimed:
		granted = out.Lease != nil
	case *core.ClaimedBatch:
		granted = len(out.Claims) > 0
	default:
		return
	}
	outcome := "granted"
	if !granted {
		outcome = "empty"
	}
	m.claimWait.WithLabelValues(outcome).Observe(d.Seconds())
}

// TraceOf is the W3C trace context of a request's headers; nil for none,
// or for a malformed one, which W3C has a receiver ignore rather than
// refuse (a tracestate that cannot be carried is dropped alone).
func TraceOf(h http.Header) *core.Trace {
	parent := h.Get("traceparent")
	if !tessera.ValidTraceparent(parent) {
		return nil
	}
	t := &core.Trace{Traceparent: parent}
	if state := strings.Join(h.Values("tracestate"), ","); tessera.ValidTracestate(state) {
		t.Tracestate = state
	}
	return t
}
