package bench

import (
	"fmt"
	"reflect"
	"testing"
	"time"
)

// The write phases are the delta of each phase's seconds over the delta
// of write transactions, in milliseconds, in the store's phase order,
// with a phase this build does not know kept at the end.
func TestWritePhasesPerWrite(t *testing.T) {
	sample := func(writes, queued, syncing, future float64) nodeSample {
		t.Helper()
		text := fmt.Sprintf(`# TYPE tessera_store_write_transactions_total counter
tessera_store_write_transactions_total %g
# TYPE tessera_store_write_transaction_seconds_total counter
tessera_store_write_transaction_seconds_total{phase="future"} %g
tessera_store_write_transaction_seconds_total{phase="queued"} %g
tessera_store_write_transaction_seconds_total{phase="syncing"} %g
`, writes, future, queued, syncing)
		fams, err := parseMetrics([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		s := nodeSample{storeCounters: map[string]float64{}}
		s.fromMetrics(fams)
		return s
	}
	before := []nodeSample{sample(10, 1, 2, 0.5), sample(0, 0, 0, 0)}
	after := []nodeSample{sample(30, 1.25, 3, 0.75), sample(20, 0.25, 1, 0.25)}
	want := []WritePhase{{"queued", 12.5}, {"syncing", 50}, {"future", 12.5}}
	if got := deltaPerTask(before, after, 7).WritePhases; !reflect.DeepEqual(got, want) {
		t.Errorf("write phases %+v, want %+v", got, want)
	}
	// A node that does not report them: none, rather than a part.
	after[1] = nodeSample{storeCounters: map[string]float64{}}
	if got := deltaPerTask(before, after, 7).WritePhases; got != nil {
		t.Errorf("with a node reporting none: %+v, want none", got)
	}
}

// CPU per call is each side's cores × seconds ÷ (tasks × calls per
// task); the ceiling is the rate at which the two together would fill
// the machine's cores, given only when every server is a process of this
// machine read from /proc.
func TestCPUPerCall(t *testing.T) {
	cores := func(c float64) *float64 { return &c }
	rep := &LoadReport{Tasks: 1000, Seconds: 2, CallsPerTask: 4, BenchCPUCores: cores(0.5),
		Nodes: []NodeReport{{CPUCores: cores(0.6), From: "proc"}, {CPUCores: cores(0.4), From: "proc"}}}
	got := cpuPerCall(rep, 2)
	// 4,000 calls: the bench 0.5 × 2 s = 1 s, the servers 2 s; then
	// 2 cores ÷ (750 µs × 4 calls) = 666.67 tasks/s.
	if got == nil || got.BenchMicros != 250 || got.ServerMicros != 500 || got.Cores != 2 ||
		got.CeilingTasksPerSecond == nil || fmt.Sprintf("%.2f", *got.CeilingTasksPerSecond) != "666.67" {
		t.Fatalf("cpu per call %+v", got)
	}
	rep.Nodes[1].From = "metrics"
	if got := cpuPerCall(rep, 2); got == nil || got.ServerMicros != 500 || got.CeilingTasksPerSecond != nil || got.Cores != 0 {
		t.Errorf("with a server read from its metrics: %+v, want the figures without a ceiling", got)
	}
	rep.Nodes[1].CPUCores = nil
	if got := cpuPerCall(rep, 2); got != nil {
		t.Errorf("with a server's CPU unknown: %+v, want none", got)
	}
	rep.Nodes[1].CPUCores, rep.Tasks = cores(0.4), 0
	if got := cpuPerCall(rep, 2); got != nil {
		t.Errorf("with no task done: %+v, want none", got)
	}
}

// The no-op's CPU per request covers both halves, and only when both
// were read.
func TestNoOpCPUPerRequest(t *testing.T) {
	before := NoOp{Requests: 1500, Seconds: 1, RequestsPerSecond: 1500, cpu: 1500 * time.Millisecond, cpuOK: true}
	after := NoOp{Requests: 500, Seconds: 1, RequestsPerSecond: 500, cpu: 500 * time.Millisecond, cpuOK: true}
	if got := combineNoOp(before, after); got.CPUMicrosPerRequest == nil || *got.CPUMicrosPerRequest != 1000 || got.RequestsPerSecond != 1000 {
		t.Errorf("combined %+v, want 1000 req/s at 1000 µs each", got)
	}
	after.cpuOK = false
	if got := combineNoOp(before, after); got.CPUMicrosPerRequest != nil {
		t.Errorf("with one half unread: %v µs, want none", *got.CPUMicrosPerRequest)
	}
}
