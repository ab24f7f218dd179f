package bench

import (
	"fmt"
	"reflect"
	"testing"
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
