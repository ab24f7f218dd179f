package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/ids"
	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// Every retention and audit-read statement walks an index: EXPLAIN QUERY
// PLAN of each shows no full scan of a table (SPEC §9). The statements are
// captured as the store runs them, so a rewrite cannot slip past the test.
func TestRetentionAndAuditReadsUseIndexes(t *testing.T) {
	ctx := context.Background()
	db := tempStore(t, meter.New(tessera.SystemClock{}))
	now := time.Now().UTC()
	err := db.Update(ctx, func(tx store.Tx) error {
		for i, ns := range []string{"main", "alpha", "beta"} {
			ev := &tessera.AuditEvent{ID: ids.New(now), Time: now, Namespace: ns, PrincipalID: "p" + string(rune('0'+i)),
				KeyID: "k", Action: "task.get", Target: "t", Status: 200}
			if err := tx.AuditInsert(ctx, ev); err != nil {
				return err
			}
		}
		return tx.AuditCountersAdd(ctx, []tessera.AuditCounter{{Minute: now, Namespace: "main", PrincipalID: "p0", Action: "claim.grant", Outcome: "empty", Count: 1}})
	})
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var seen []string
	traceSQL = func(_ *conn, sql string, _ []any, control bool) {
		if control {
			return
		}
		mu.Lock()
		seen = append(seen, sql)
		mu.Unlock()
	}
	defer func() { traceSQL = nil }()

	since := now.Add(-24 * time.Hour)
	filters := []store.AuditFilter{
		{Since: since, Limit: 10},                                 // admin, everything
		{Since: since, Limit: 10, Namespace: "alpha"},             // admin, one namespace
		{Since: since, Limit: 10, PrincipalID: "p1"},              // own audit
		{Since: since, Limit: 10, Namespace: "main", Action: "x"}, // filtered
		{Since: since, Limit: 10, Before: tessera.IDFloor(now), PrincipalID: "p0", Outcome: "empty"},
	}
	err = db.Update(ctx, func(tx store.Tx) error {
		for _, f := range filters {
			if _, err := tx.AuditEvents(ctx, f); err != nil {
				return err
			}
			if _, err := tx.AuditCounters(ctx, f); err != nil {
				return err
			}
		}
		cutoff := now.Add(-time.Hour)
		if _, err := tx.AuditEventsPurge(ctx, cutoff, 500); err != nil {
			return err
		}
		if _, err := tx.AuditCountersPurge(ctx, cutoff, 500); err != nil {
			return err
		}
		if _, err := tx.IdempotencyPurge(ctx, cutoff, 500); err != nil {
			return err
		}
		if _, err := tx.SaltsPurge(ctx, "2000-01-01"); err != nil {
			return err
		}
		if _, err := tx.PrincipalsPurge(ctx, cutoff, 500); err != nil {
			return err
		}
		// The live stream's reads of the trail, a task's trail, a
		// queue's throughput, its purge and its pause.
		for _, f := range []store.StreamFilter{
			{Namespace: "main", After: tessera.IDFloor(since), Actions: []string{"task.enqueue", "claim.grant"}, Queue: "q", Limit: 10},
			{Namespace: "main", After: tessera.IDFloor(since), Actions: []string{"task.enqueue"}, Public: true, Limit: 10},
			{Namespace: "main", After: tessera.IDFloor(since), Actions: []string{"task.enqueue"}, TaskID: "t", Scan: 100, Limit: 10},
		} {
			if _, err := tx.AuditStream(ctx, f); err != nil {
				return err
			}
		}
		if _, err := tx.AuditThroughput(ctx, "main", since, []string{"claim.submit", "task.lapse"}, 100); err != nil {
			return err
		}
		if _, err := tx.QueuesPaused(ctx, "main"); err != nil {
			return err
		}
		_, err := tx.TaskPurgeFinished(ctx, "main", "q", []string{"dead", "canceled"}, 10)
		return err
	})
	traceSQL = nil
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) < 20 {
		t.Fatalf("captured %d statements, want every read and purge", len(seen))
	}
	for _, sql := range seen {
		var plan []string
		err := db.View(ctx, func(st store.Tx) error {
			return st.(*tx).c.query(context.Background(), "EXPLAIN QUERY PLAN "+sql, placeholders(sql), func(s *sqlite3.Stmt) error {
				plan = append(plan, s.ColumnText(3))
				return nil
			})
		})
		if err != nil {
			t.Fatalf("explain %q: %v", sql, err)
		}
		for _, step := range plan {
			if fullScan(t, db, step) {
				t.Errorf("full scan %q in plan of:\n%s\nplan: %v", step, sql, plan)
			}
		}
	}
}

// fullScan reports whether a step of EXPLAIN QUERY PLAN scans a table of
// the store whole. "SCAN t USING INDEX" and "USING PRIMARY KEY" are index
// walks; a scan of anything but a table walks a statement's own list (a
// recursive walk of namespaces or priorities, a subquery, json_each of its
// arguments).
func fullScan(t *testing.T, db *DB, step string) bool {
	t.Helper()
	name, ok := strings.CutPrefix(step, "SCAN ")
	if !ok || strings.Contains(step, "USING") {
		return false
	}
	name, _, _ = strings.Cut(name, " ")
	var tables int
	err := db.View(context.Background(), func(st store.Tx) error {
		return st.(*tx).c.query(context.Background(), `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?`,
			[]any{name}, func(s *sqlite3.Stmt) error {
				tables = s.ColumnInt(0)
				return nil
			})
	})
	if err != nil {
		t.Fatal(err)
	}
	return tables > 0
}

// placeholders gives each ? of sql a NULL, enough to plan it.
func placeholders(sql string) []any {
	return make([]any, strings.Count(sql, "?"))
}

// auditByPrincipalSteps stores one audit event and counter in each of n
// namespaces by other principals and one of the reader's own, then reads
// the reader's audit (GET /v1/me/audit) on a fresh connection and returns
// the engine's VM steps for it.
func auditByPrincipalSteps(t *testing.T, n int) int64 {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tessera.db")
	db, err := Open(ctx, path, meter.New(tessera.SystemClock{}))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Now().UTC()
	err = db.Update(ctx, func(tx store.Tx) error {
		for i := range n + 1 {
			ns, p := fmt.Sprintf("ns-%05d", i), "other"
			if i == n/2 {
				p = "me"
			}
			ev := &tessera.AuditEvent{ID: ids.New(now), Time: now, Namespace: ns, PrincipalID: p, KeyID: "k", Action: "task.get", Target: "t", Status: 200}
			if err := tx.AuditInsert(ctx, ev); err != nil {
				return err
			}
			if err := tx.PrincipalNamespaceAdd(ctx, p, ns); err != nil {
				return err
			}
			if err := tx.AuditCountersAdd(ctx, []tessera.AuditCounter{{Minute: now, Namespace: ns, PrincipalID: p, Action: "task.get", Outcome: "forbidden", Count: 1}}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	f := store.AuditFilter{PrincipalID: "me", Since: now.Add(-time.Hour), Limit: 50}
	steps, _ := readSteps(t, path, func(tx *tx) error {
		evs, err := tx.AuditEvents(ctx, f)
		if err != nil || len(evs) != 1 {
			return fmt.Errorf("own events: %v, %v", evs, err)
		}
		cs, err := tx.AuditCounters(ctx, f)
		if err != nil || len(cs) != 1 {
			return fmt.Errorf("own counters: %v, %v", cs, err)
		}
		return nil
	})
	return steps
}

// A principal's audit read visits the namespaces it was seen in, not every
// namespace (it took 198 ms for a new key at 10,000 namespaces): the
// engine's work is the same at 10 namespaces as at 2,000.
func TestAuditByPrincipalDoesNotGrowWithNamespaces(t *testing.T) {
	small, large := auditByPrincipalSteps(t, 10), auditByPrincipalSteps(t, 2000)
	t.Logf("own audit read: %d VM steps at 10 namespaces, %d at 2,000", small, large)
	if small != large {
		t.Errorf("own audit read work grew with the namespaces: %d VM steps at 10, %d at 2,000", small, large)
	}
}

// Every statement the core runs on the claim, heartbeat, submit and
// enqueue paths — lapses, counts, events and reads included — is an index
// seek: EXPLAIN QUERY PLAN of each, captured as the core runs it over this
// backend, shows no full scan of a table. This is what keeps a claim's
// cost independent of the namespace's history.
func TestHotPathStatementsUseIndexes(t *testing.T) {
	ctx := context.Background()
	clock := tessera.NewManualClock(time.Now())
	m := meter.New(clock)
	db := tempStore(t, m)
	svc, a := adminService(t, db, m, clock, core.DefaultConfig())
	defer svc.Close()

	var mu sync.Mutex
	seen := map[string]bool{}
	traceSQL = func(_ *conn, sql string, _ []any, control bool) {
		if control {
			return
		}
		mu.Lock()
		seen[sql] = true
		mu.Unlock()
	}
	defer func() { traceSQL = nil }()

	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	for range 3 {
		_, err := svc.Enqueue(ctx, a, "main", core.EnqueueParams{Title: "t", Queue: "q"}, "")
		must("enqueue", err)
	}
	_, err := svc.Enqueue(ctx, a, "main", core.EnqueueParams{Title: "t", Queue: "q", Public: true}, "key-1")
	must("idempotent enqueue", err)
	c, err := svc.Claim(ctx, a, "main", core.ClaimParams{Queue: "q", LeaseSeconds: 10})
	must("claim", err)
	_, err = svc.Heartbeat(ctx, a, "main", c.Task.ID, core.HeartbeatParams{LeaseToken: c.Lease.Token})
	must("heartbeat", err)
	_, err = svc.AddNote(ctx, a, "main", c.Task.ID, "a note")
	must("note", err)
	_, err = svc.Events(ctx, a, "main", c.Task.ID, 0, 0)
	must("events", err)
	_, err = svc.Submit(ctx, a, "main", c.Task.ID, core.SubmitParams{LeaseToken: c.Lease.Token, Outcome: "failed"}, "key-2")
	must("submit", err)
	c2, err := svc.Claim(ctx, a, "main", core.ClaimParams{Queue: "q", LeaseSeconds: 10})
	must("second claim", err)
	_, err = svc.Release(ctx, a, "main", c2.Task.ID, core.ReleaseParams{LeaseToken: c2.Lease.Token})
	must("release", err)
	c3, err := svc.Claim(ctx, a, "main", core.ClaimParams{Queue: "q", LeaseSeconds: 10})
	must("third claim", err)
	_, err = svc.ChangeTask(ctx, a, "main", c3.Task.ID, core.ChangeCancel, false)
	must("cancel", err)
	clock.Advance(time.Minute) // the lease lapses; the next claim notices
	_, err = svc.Claim(ctx, a, "main", core.ClaimParams{Queue: "q"})
	must("claim after a lapse", err)
	_, err = svc.Claim(ctx, a, "main", core.ClaimParams{Queue: "empty"})
	must("empty claim", err)
	_, err = svc.Counts(ctx, a, "main")
	must("counts", err)
	_, err = svc.GetTask(ctx, a, "main", c.Task.ID)
	must("get", err)
	_, err = svc.Health(ctx, a, "main")
	must("health", err)
	// Dependencies and checkpoints: a parent settles its children through
	// the edges' key, never a walk of the namespace.
	parent, err := svc.Enqueue(ctx, a, "main", core.EnqueueParams{Title: "p", Queue: "dq"}, "")
	must("parent", err)
	child, err := svc.Enqueue(ctx, a, "main", core.EnqueueParams{Title: "c", Queue: "dq", After: []string{parent.ID}}, "")
	must("child", err)
	_, err = svc.Dependents(ctx, a, "main", parent.ID, "", 10)
	must("dependents", err)
	cp, err := svc.Claim(ctx, a, "main", core.ClaimParams{Queue: "dq", LeaseSeconds: 10})
	must("claim the parent", err)
	_, err = svc.Heartbeat(ctx, a, "main", cp.Task.ID, core.HeartbeatParams{LeaseToken: cp.Lease.Token, Checkpoint: []byte(`{"n":1}`)})
	must("checkpoint", err)
	_, err = svc.Submit(ctx, a, "main", cp.Task.ID, core.SubmitParams{LeaseToken: cp.Lease.Token, Outcome: "succeeded"}, "")
	must("submit the parent", err)
	_, err = svc.GetTask(ctx, a, "main", child.ID)
	must("get the child", err)
	// Fleet claims: lanes, groups, caps, rates and the fleet view.
	_, err = svc.SetQueueSettings(ctx, a, "main", "fq", core.QueueSettingsParams{GroupMaxRunning: 2, Rate: &core.Rate{PerSecond: 100}})
	must("queue settings", err)
	_, err = svc.Enqueue(ctx, a, "main", core.EnqueueParams{Title: "g", Queue: "fq", Group: "tenant", Requires: []string{"gpu"}}, "")
	must("grouped enqueue", err)
	_, err = svc.Enqueue(ctx, a, "main", core.EnqueueParams{Title: "p", Queue: "fq"}, "")
	must("plain enqueue in a fleet queue", err)
	fc, err := svc.Claim(ctx, a, "main", core.ClaimParams{Queue: "fq", Capabilities: []string{"gpu"}})
	must("fleet claim", err)
	_, err = svc.Submit(ctx, a, "main", fc.Task.ID, core.SubmitParams{LeaseToken: fc.Lease.Token, Outcome: "succeeded", CooldownSeconds: 1}, "")
	must("submit with a cooldown", err)
	_, err = svc.QueueFleet(ctx, a, "main", "fq")
	must("fleet view", err)
	// Unique and debounce keys, a batch submit, parent results (issues
	// 37 and 40).
	for range 2 {
		_, err = svc.Enqueue(ctx, a, "main", core.EnqueueParams{Title: "u", Queue: "kq", UniqueKey: "k"}, "")
		must("unique enqueue", err)
		_, err = svc.Enqueue(ctx, a, "main", core.EnqueueParams{Title: "d", Queue: "kq", Debounce: &core.Debounce{Key: "k", Seconds: 1}}, "")
		must("debounced enqueue", err)
	}
	kp, err := svc.Enqueue(ctx, a, "main", core.EnqueueParams{Title: "kp", Queue: "kq"}, "")
	must("a parent", err)
	_, err = svc.Enqueue(ctx, a, "main", core.EnqueueParams{Title: "kc", Queue: "kc", After: []string{kp.ID}, ParentResults: true}, "")
	must("a child with its parent's results", err)
	clock.Advance(time.Second) // the debounced task is due
	batch, err := svc.ClaimN(ctx, a, "main", core.ClaimBatchParams{ClaimParams: core.ClaimParams{Queue: "kq", LeaseSeconds: 10}, Max: 10})
	must("batch claim", err)
	var items []core.SubmitItem
	for _, c := range batch.Claims {
		items = append(items, core.SubmitItem{TaskID: c.Task.ID, SubmitParams: core.SubmitParams{LeaseToken: c.Lease.Token, Outcome: "succeeded"}})
	}
	_, err = svc.SubmitBatch(ctx, a, "main", items, "")
	must("batch submit", err)
	_, err = svc.Claim(ctx, a, "main", core.ClaimParams{Queue: "kc", LeaseSeconds: 10})
	must("claim with parent results", err)
	traceSQL = nil

	if len(seen) < 15 {
		t.Fatalf("captured %d statements; the paths ran fewer than expected", len(seen))
	}
	for sql := range seen {
		var plan []string
		err := db.View(ctx, func(st store.Tx) error {
			return st.(*tx).c.query(ctx, "EXPLAIN QUERY PLAN "+sql, placeholders(sql), func(s *sqlite3.Stmt) error {
				plan = append(plan, s.ColumnText(3))
				return nil
			})
		})
		if err != nil {
			t.Fatalf("explain %q: %v", sql, err)
		}
		for _, step := range plan {
			if fullScan(t, db, step) {
				t.Errorf("full scan %q in plan of:\n%s\nplan: %v", step, sql, plan)
			}
			// A seek on the namespace alone walks all its history: the
			// lapse check once did, through the primary key.
			if m := namespaceOnlyRE.FindStringSubmatch(step); m != nil && historyTables[m[1]] {
				t.Errorf("%q walks the namespace's %s in plan of:\n%s\nplan: %v", step, m[1], sql, plan)
			}
		}
	}
}

// namespaceOnlyRE matches a seek constrained by the namespace alone.
var namespaceOnlyRE = regexp.MustCompile(`^SEARCH (\w+) .*\(namespace=\?\)$`)

// historyTables grow with a namespace's history; a hot path must never
// walk one by its namespace alone.
var historyTables = map[string]bool{"tasks": true, "runs": true, "task_events": true, "audit_events": true, "record_versions": true, "task_ready": true,
	"task_edges": true, "task_dependencies": true, "task_checkpoints": true}

// writerStats sums the writer's statements' counters, read on the
// committer's own goroutine.
func (db *DB) writerStats(t *testing.T) (vmSteps, reprepares int64) {
	t.Helper()
	res := db.submit(&writeReq{ctx: context.Background(), book: func(*sqlite3.Conn) error {
		for _, s := range db.writer.stmts {
			vmSteps += int64(s.Status(sqlite3.STMTSTATUS_VM_STEP, false))
			reprepares += int64(s.Status(sqlite3.STMTSTATUS_REPREPARE, false))
		}
		return nil
	}})
	if res.err != nil {
		t.Fatal(res.err)
	}
	return vmSteps, reprepares
}

// claimCycleWork runs claim → heartbeat → submit cycles through the core
// in a queue that already holds history finished tasks, and returns the
// engine's work for the cycles (VM steps on the writer) and the rows the
// meter counted as read.
func claimCycleWork(t *testing.T, history int) (steps, rowsRead, reprepares int64) {
	t.Helper()
	ctx := context.Background()
	clock := tessera.NewManualClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	m := meter.New(clock)
	db := tempStore(t, m)
	now := clock.Now()
	if err := db.Update(ctx, func(tx store.Tx) error {
		for i := range history {
			if err := tx.TaskInsert(ctx, finishedTask(i, now)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	svc, a := adminService(t, db, m, clock, core.DefaultConfig())
	defer svc.Close()
	cycle := func() {
		// Time moves, as it does for a server: every bound "now" differs.
		clock.Advance(time.Millisecond)
		_, err := svc.Enqueue(ctx, a, "main", core.EnqueueParams{Title: "t", Queue: "q"}, "")
		if err != nil {
			t.Fatal(err)
		}
		c, err := svc.Claim(ctx, a, "main", core.ClaimParams{Queue: "q"})
		if err != nil || c.Lease == nil {
			t.Fatalf("claim: %+v, %v", c, err)
		}
		if _, err := svc.Heartbeat(ctx, a, "main", c.Task.ID, core.HeartbeatParams{LeaseToken: c.Lease.Token}); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Submit(ctx, a, "main", c.Task.ID, core.SubmitParams{LeaseToken: c.Lease.Token, Outcome: "succeeded"}, ""); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		cycle() // warm: statements prepared, the day's salt made
	}
	steps0, reprep0 := db.writerStats(t)
	_, read0 := m.Lifetime()
	for range 20 {
		cycle()
	}
	steps1, reprep1 := db.writerStats(t)
	_, read1 := m.Lifetime()
	return steps1 - steps0, read1 - read0, reprep1 - reprep0
}

// Issue 12: a claim's cost does not grow with the namespace's history. The
// engine's work for claim → heartbeat → submit cycles — and the rows the
// meter counts as read — is the same beside 20,000 finished tasks as
// beside 200 (the lapse check once walked them all), and no statement of
// the path is prepared again once warm (bindings used to be cleared after
// each run, and SQLite prepared the lapse check anew every claim). The
// meter counts the steps of index walks (walkStep); VM steps also count
// what no walk shows, such as a sort, and are held equal too.
func TestClaimWorkDoesNotGrowWithHistory(t *testing.T) {
	smallSteps, smallRead, smallReprep := claimCycleWork(t, 200)
	largeSteps, largeRead, largeReprep := claimCycleWork(t, 20000)
	t.Logf("20 cycles: %d VM steps and %d rows read beside 200 finished tasks, %d and %d beside 20,000", smallSteps, smallRead, largeSteps, largeRead)
	if smallSteps != largeSteps || smallRead != largeRead {
		t.Errorf("claim work grew with history: %d VM steps, %d rows read at 200; %d, %d at 20,000", smallSteps, smallRead, largeSteps, largeRead)
	}
	if smallReprep != 0 || largeReprep != 0 {
		t.Errorf("statements were prepared again: %d and %d times", smallReprep, largeReprep)
	}
}

// The meter counts the rows a statement steps over, whatever its plan:
// an index walk that a constraint bounds (the slot walkStep reads), a
// scan that none bounds, and a seek that steps over nothing.
func TestMeterCountsIndexWalks(t *testing.T) {
	c, err := openConn(filepath.Join(t.TempDir(), "walk.db"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	if err := c.c.Exec(`CREATE TABLE t (ns TEXT, id INTEGER, state TEXT, PRIMARY KEY (ns, id)) WITHOUT ROWID;
CREATE INDEX t_state ON t (ns, state);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000)
INSERT INTO t SELECT 'a', i, CASE WHEN i = 1000 THEN 'leased' ELSE 'done' END FROM n;`); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, sql string
		read      int64
	}{
		// 1 row returned after 999 steps along the primary key.
		{"walk of the primary key", `SELECT id FROM t WHERE ns = ? AND +state = ?`, 999},
		{"scan", `SELECT id FROM t WHERE +ns = ? AND +state = ?`, 999},
		{"walk returning what it visits", `SELECT id FROM t WHERE ns = ? AND state = 'done' AND ? != ''`, 999},
		{"seek", `SELECT id FROM t WHERE ns = ? AND state = ?`, 1},
	} {
		c.reset()
		if err := c.query(context.Background(), tc.sql, []any{"a", "leased"}, nil); err != nil {
			t.Fatal(err)
		}
		if c.rowsRead != tc.read {
			t.Errorf("%s: %d rows read, want %d", tc.name, c.rowsRead, tc.read)
		}
	}
}
