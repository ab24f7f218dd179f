package bench

import (
	"context"
	"testing"

	"github.com/tessera-dev/tessera/internal/store/postgres/pgtest"
	"github.com/tessera-dev/tessera/internal/testbin"
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
	}
	byName := meetTargets(t, rows, Targets)
	// A task enqueued in a batch costs at most what its single enqueue
	// costs (issue 12); the enqueue row also pays its namespace's first
	// write, which the batch, in the same namespace later, does not.
	if per, one := *byName["enqueue_batch_100_per_task"].RowsWritten, *byName["enqueue"].RowsWritten; per > one {
		t.Errorf("a task in a batch of 100 writes %d rows, a single enqueue %d", per, one)
	}
	// A claim costs the same beside 1,000 and beside 100,000 finished
	// tasks as in a fresh queue (issues 12, 28): the meter counts every
	// row an index walk steps over, so a plan that walks history shows
	// here.
	claimsFlatInHistory(t, byName)
	// A claim with capabilities costs the same beside 1,000 ready tasks
	// it cannot take (issue 31): it seeks the lanes it can take.
	if u, c := byName["claim_requires_1k_unmatched"], byName["claim_requires"]; *u.RowsRead != *c.RowsRead || *u.RowsWritten != *c.RowsWritten {
		t.Errorf("a claim beside 1,000 unmatched tasks costs %d written, %d read; beside none %d, %d",
			*u.RowsWritten, *u.RowsRead, *c.RowsWritten, *c.RowsRead)
	}
	// An idle worker costs about one counter row a minute and nothing more.
	if w := *byName["idle_worker_day"].RowsWritten; w < 1440 {
		t.Errorf("idle worker day wrote %d rows: fewer than one counter a minute means polls went uncounted", w)
	}
}

// claimsFlatInHistory fails the test unless a claim beside 1,000 and
// beside 100,000 finished tasks costs what one in a fresh queue does.
func claimsFlatInHistory(t *testing.T, byName map[string]Row) {
	t.Helper()
	c := byName["claim_granted"]
	for _, name := range []string{"claim_granted_1k_finished", "claim_granted_100k_finished"} {
		if h := byName[name]; *h.RowsRead != *c.RowsRead || *h.RowsWritten != *c.RowsWritten {
			t.Errorf("%s costs %d written, %d read; a claim in a fresh queue %d, %d",
				name, *h.RowsWritten, *h.RowsRead, *c.RowsWritten, *c.RowsRead)
		}
	}
}

// meetTargets fails the test for every row over its target, and returns
// the rows by name.
func meetTargets(t *testing.T, rows []Row, targets map[string][2]int64) map[string]Row {
	t.Helper()
	byName := map[string]Row{}
	for _, row := range rows {
		byName[row.Request] = row
		target, ok := targets[row.Request]
		if !ok || row.RowsWritten == nil {
			continue
		}
		if target[0] >= 0 && *row.RowsWritten > target[0] {
			t.Errorf("%s writes %d rows, target ≤ %d", row.Request, *row.RowsWritten, target[0])
		}
		if target[1] >= 0 && *row.RowsRead > target[1] {
			t.Errorf("%s reads %d rows, target ≤ %d", row.Request, *row.RowsRead, target[1])
		}
	}
	return byName
}

// The same scenario on PostgreSQL: the rows issue 28 names stay within
// their targets — an idle worker's day reads at most 5,000 rows there
// too — and claims stay flat in history.
func TestRowsScenarioOnPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates a day of idle polling")
	}
	testbin.Needs(t, "PostgreSQL")
	rows, err := Rows(context.Background(), pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	claimsFlatInHistory(t, meetTargets(t, rows, PostgresTargets))
}
