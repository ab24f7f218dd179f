package bench

import (
	"context"
	"testing"
)

// The scenario runs end to end, reports every request name in order, and
// every row it can measure stays within the target — a change that
// makes a request cost more rows than its target fails here, by row count,
// never by time.
func TestRowsScenarioMeetsTargets(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates a day of idle polling")
	}
	rows, err := Rows(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(RowNames) {
		t.Fatalf("%d rows, want %d", len(rows), len(RowNames))
	}
	for i, row := range rows {
		if row.Request != RowNames[i] {
			t.Errorf("row %d is %q, want %q", i, row.Request, RowNames[i])
		}
		if row.RowsWritten == nil || row.RowsRead == nil {
			t.Errorf("%s not measured", row.Request)
			continue
		}
		t.Logf("%-28s written %5d read %5d", row.Request, *row.RowsWritten, *row.RowsRead)
		target, ok := Targets[row.Request]
		if !ok {
			continue
		}
		if target[0] >= 0 && *row.RowsWritten > target[0] {
			t.Errorf("%s writes %d rows, target ≤ %d", row.Request, *row.RowsWritten, target[0])
		}
		if target[1] >= 0 && *row.RowsRead > target[1] {
			t.Errorf("%s reads %d rows, target ≤ %d", row.Request, *row.RowsRead, target[1])
		}
	}
	byName := map[string]Row{}
	for _, row := range rows {
		byName[row.Request] = row
	}
	// A task enqueued in a batch costs at most what its single enqueue
	// costs (issue 12); the enqueue row also pays its namespace's first
	// write, which the batch, in the same namespace later, does not.
	if per, one := *byName["enqueue_batch_100_per_task"].RowsWritten, *byName["enqueue"].RowsWritten; per > one {
		t.Errorf("a task in a batch of 100 writes %d rows, a single enqueue %d", per, one)
	}
	// A claim costs the same beside 10,000 finished tasks as in a fresh
	// queue (issue 12): the meter counts every row an index walk steps
	// over, so a plan that walks history shows here.
	if h, c := byName["claim_granted_10k_finished"], byName["claim_granted"]; *h.RowsRead != *c.RowsRead || *h.RowsWritten != *c.RowsWritten {
		t.Errorf("a claim beside 10,000 finished tasks costs %d written, %d read; in a fresh queue %d, %d",
			*h.RowsWritten, *h.RowsRead, *c.RowsWritten, *c.RowsRead)
	}
	// An idle worker costs about one counter row a minute and nothing more.
	if w := *byName["idle_worker_day"].RowsWritten; w < 1440 {
		t.Errorf("idle worker day wrote %d rows: fewer than one counter a minute means polls went uncounted", w)
	}
}
