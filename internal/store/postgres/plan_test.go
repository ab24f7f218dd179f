package postgres

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tessera-dev/tessera/internal/store/postgres/pgtest"
	"github.com/tessera-dev/tessera/internal/store/sqlschema"
)

// The task statements — retention's batch (FOR UPDATE SKIP LOCKED),
// TaskHold (FOR SHARE), the claim, the lapse check and the ready reads —
// seek an index and take its order for theirs (no sort), in the generic
// plan the store's prepared statements may run with as well as the custom
// one, beside 20,000 tasks of which a fifth are finished.
func TestLockingPlansSeekAnIndex(t *testing.T) {
	url := pgtest.Schema(t)
	open(t, url, newMeter()) // migrates the schema
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	oldestSQL, _ := sqlschema.PostgreSQL.OldestReady("", "", 0)
	scheduledSQL, _ := sqlschema.PostgreSQL.Scheduled("", "", 0, time.Time{})
	lanesSQL, _ := sqlschema.PostgreSQL.ReadyLanes("", "")
	for _, sql := range []string{
		`INSERT INTO tasks (namespace, id, queue, title, brief, labels, priority, public, max_attempts, attempts, state,
 run_at, created_by, created_at, updated_at, cancel_requested, finished_at)
 SELECT 'main', lpad(i::text, 8, '0'), 'q', 't', '', '[]', 0, false, 3, 0,
 CASE WHEN i % 5 = 0 THEN 'succeeded' ELSE 'ready' END, i, 'p', i, i, false,
 CASE WHEN i % 5 = 0 THEN i END
 FROM generate_series(1, 20000) i`,
		`ANALYZE tasks`,
		// Keys held by 20,000 tasks (issue 40), so a seq scan would cost.
		`INSERT INTO task_unique (namespace, queue, unique_key, task_id) SELECT 'main', 'q', 'k' || i, lpad(i::text, 8, '0') FROM generate_series(1, 20000) i`,
		`INSERT INTO task_debounce (namespace, queue, debounce_key, task_id) SELECT 'main', 'q', 'k' || i, lpad(i::text, 8, '0') FROM generate_series(1, 20000) i`,
		`ANALYZE task_unique`,
		`ANALYZE task_debounce`,
		`PREPARE get_many AS ` + taskGetManySQL,
		`PREPARE by_unique AS ` + taskByUniqueKey,
		`PREPARE unique_free AS ` + uniqueFree,
		`PREPARE debounce_holder AS ` + debounceHolder,
		`PREPARE debounce_move AS ` + debounceMove,
		`PREPARE debounce_free AS ` + debounceFree,
		`PREPARE purge AS ` + purgeBatchSQL,
		`PREPARE hold AS ` + taskHoldSQL,
		`PREPARE claim AS ` + claimSQL,
		`PREPARE lapsed AS ` + lapsedSQL + ` FOR UPDATE SKIP LOCKED`,
		`PREPARE oldest AS ` + sqlschema.Numbered1(oldestSQL),
		`PREPARE scheduled AS ` + sqlschema.Numbered1(scheduledSQL),
		`PREPARE lanes AS ` + sqlschema.Numbered1(lanesSQL),
		`PREPARE heads AS ` + laneHeadsSQL,
		`PREPARE group_leases AS ` + groupLeasesSQL,
	} {
		if _, err := c.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		if _, err := c.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
			t.Fatal(err)
		}
		for _, p := range []struct{ exec, index, seeks string }{
			{`EXECUTE purge(1000, 500)`, "tasks_claim", ""},
			{`EXECUTE hold('main', '00000042')`, "tasks_pkey", ""},
			{`EXECUTE claim('main', 'q', 0, 30000, 30000, 'r', 'p', '\x01', 90000, 60, 'r', 'p', 30000)`, "tasks_ready", ""},
			{`EXECUTE lapsed('main', 'q', 30000, 32)`, "tasks_claim", ""},
			{`EXECUTE oldest('main', 'q', 0, 'main', 'q', 0, 'main', 'q', 0)`, "tasks_ready", ""},
			{`EXECUTE scheduled('main', 'q', 0, 'main', 'q', 0, 'main', 'q', 0, 30000)`, "tasks_ready",
				`"Index Cond": "((namespace = $7) AND (queue = $8) AND (lane = $9) AND (priority = p.prio) AND (run_at > $10))"`},
			{`EXECUTE lanes('main', 'q', 'main', 'q')`, "tasks_ready", ""},
			{`EXECUTE heads('main', 'q', '{0,1}', 30000)`, "tasks_ready", ""},
			{`EXECUTE group_leases('main', 'q', 30000, 'g', 4)`, "tasks_claim", ""},
			{`EXECUTE get_many('main', '{00000042,00000043,00000999}')`, "tasks_pkey", ""},
			{`EXECUTE by_unique('main', 'main', 'q', 'k42')`, "task_unique_pkey", ""},
			{`EXECUTE unique_free('main', 'q', 'k42', '00000042')`, "task_unique_pkey", ""},
			{`EXECUTE debounce_holder('main', 'q', 'k42')`, "task_debounce_pkey", ""},
			{`EXECUTE debounce_move('00000043', 'main', 'q', 'k42', '00000042')`, "task_debounce_pkey", ""},
			{`EXECUTE debounce_free('main', 'q', 'k42', '00000042')`, "task_debounce_pkey", ""},
		} {
			var plan string
			if err := c.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+p.exec).Scan(&plan); err != nil {
				t.Fatalf("%s: %v", p.exec, err)
			}
			// A sort would mean the planner did not take the index's
			// order for the statement's: it would read every ready task.
			// scheduled's count may sort what a bitmap seek of its range
			// found (the range is in the index's condition): a wider
			// tasks row tips its generic plan there.
			sorts := strings.Contains(plan, `"Node Type": "Sort"`)
			if sorts && p.seeks != "" {
				sorts = !strings.Contains(plan, p.seeks)
			}
			if strings.Contains(plan, `"Seq Scan"`) || sorts || !strings.Contains(plan, `"Index Name": "`+p.index+`"`) {
				t.Errorf("%s, %s: want a seek of %s in its order, got %s", mode, p.exec, p.index, plan)
			}
		}
	}
}

// A parent finds its children with one seek of the edges' key, whatever
// else the namespace holds: 10,000 children of one parent among 50,000
// edges, in the generic plan as in the custom one; a batch asks which of
// its tasks are parents with a probe of that key each.
func TestDependencyChildrenSeekTheirParent(t *testing.T) {
	url := pgtest.Schema(t)
	open(t, url, newMeter())
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for _, sql := range []string{
		`INSERT INTO task_edges (namespace, parent_id, child_id)
 SELECT 'main', CASE WHEN i <= 10000 THEN 'P' ELSE 'Q' || (i % 400) END, lpad(i::text, 8, '0')
 FROM generate_series(1, 50000) i`,
		`ANALYZE task_edges`,
		`PREPARE children AS ` + depChildren,
		`PREPARE parents AS ` + depParentsSQL,
	} {
		if _, err := c.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		if _, err := c.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
			t.Fatal(err)
		}
		var plan string
		if err := c.QueryRow(ctx, `EXPLAIN (FORMAT JSON) EXECUTE children('main', 'P', '00005000', 100)`).Scan(&plan); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(plan, `"Seq Scan"`) || !strings.Contains(plan, `"Index Name": "task_edges_pkey"`) {
			t.Errorf("%s: want a seek of task_edges_pkey, got %s", mode, plan)
		}
		// Which of a batch's tasks have children: a probe of the key each.
		if err := c.QueryRow(ctx, `EXPLAIN (FORMAT JSON) EXECUTE parents('main', '{P,Q7,X}')`).Scan(&plan); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(plan, `"Seq Scan"`) || !strings.Contains(plan, `"Index Name": "task_edges_pkey"`) {
			t.Errorf("%s: DependencyParents wants a probe of task_edges_pkey, got %s", mode, plan)
		}
	}
}
