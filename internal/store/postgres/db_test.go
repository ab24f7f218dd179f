package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/store/postgres/pgtest"
	"github.com/tessera-dev/tessera/internal/store/sqlschema"
	"github.com/tessera-dev/tessera/internal/tessera"
)

var epoch = time.UnixMilli(1893456000000).UTC()

func open(t *testing.T, url string, m *meter.Meter, opts ...Option) *DB {
	t.Helper()
	db, err := Open(context.Background(), url, m, opts...)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func newMeter() *meter.Meter { return meter.New(tessera.NewManualClock(epoch)) }

// spentMeter is a meter whose written allowance is spent.
func spentMeter(t *testing.T) *meter.Meter {
	t.Helper()
	m := newMeter()
	if err := m.SetAllowance(context.Background(), meter.Allowance{RowsWrittenPerDay: 1}); err != nil {
		t.Fatal(err)
	}
	m.Add(context.Background(), 1, 0)
	return m
}

func task(id string) *tessera.Task {
	return &tessera.Task{Namespace: "main", ID: id, Queue: "default", Title: "t", Labels: []string{},
		MaxAttempts: 3, State: tessera.StateReady, RunAt: epoch, CreatedBy: "p", CreatedAt: epoch, UpdatedAt: epoch}
}

// isCode reports whether err is answered with code: unavailable for
// store.Unavailable, else its *tessera.Error's.
func isCode(err error, code tessera.Code) bool {
	if store.IsUnavailable(err) {
		return code == tessera.CodeUnavailable
	}
	return tessera.ErrorCode(err) == code
}

// §2: opening an up-to-date schema writes nothing. The second open runs on
// connections whose every transaction is read-only by default, so any
// write it tried would fail it; it also meters no row written.
func TestColdStartWritesNothing(t *testing.T) {
	url := pgtest.Schema(t)
	first := open(t, url, newMeter())
	if err := first.Update(context.Background(), func(tx store.Tx) error { return tx.TaskInsert(context.Background(), task("01A")) }); err != nil {
		t.Fatal(err)
	}
	first.Close()

	m := newMeter()
	second := open(t, url+"&default_transaction_read_only=on", m)
	if today := m.Today(); today.RowsWritten != 0 || today.RowsRead != 1 {
		t.Errorf("cold start metered written %d read %d, want 0 and the meta row", today.RowsWritten, today.RowsRead)
	}
	err := second.View(context.Background(), func(tx store.Tx) error { _, err := tx.TaskGet(context.Background(), "main", "01A"); return err })
	if err != nil {
		t.Errorf("task after a read-only reopen: %v", err)
	}
	// A server that refuses writes for its own reasons is unavailable,
	// not a fault of ours.
	err = second.Update(context.Background(), func(tx store.Tx) error { return tx.TaskInsert(context.Background(), task("01B")) })
	if !isCode(err, tessera.CodeUnavailable) {
		t.Errorf("a write to a read-only server: %v, want unavailable", err)
	}
}

// §2: a new schema gets its whole schema in one transaction: every
// catalog row of the schema and the version row carry one transaction id.
func TestNewSchemaInOneTransaction(t *testing.T) {
	url := pgtest.Schema(t)
	open(t, url, newMeter())
	var xmins, tables, version int
	var metaXmin, classXmin string
	pgtest.SQL(t, url, `SELECT count(DISTINCT xmin::text), min(xmin::text), count(*) FILTER (WHERE relkind = 'r')
 FROM pg_class WHERE relnamespace = current_schema()::regnamespace`, &xmins, &classXmin, &tables)
	pgtest.SQL(t, url, `SELECT xmin::text, schema_version FROM tessera_meta`, &metaXmin, &version)
	files, _ := sqlschema.Migrations(migrationFS)
	if xmins != 1 || metaXmin != classXmin {
		t.Errorf("the schema was made by %d transactions (tables %s, version row %s), want 1", xmins, classXmin, metaXmin)
	}
	if version != len(files) || tables < 20 {
		t.Errorf("schema version %d with %d tables, want %d and every table", version, tables, len(files))
	}
}

// Nodes starting at once on a new schema: one migrates, the others wait
// for its lock and find the work done.
func TestConcurrentOpensMigrateOnce(t *testing.T) {
	url := pgtest.Schema(t)
	const nodes = 4
	errs := make([]error, nodes)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() {
			db, err := Open(context.Background(), url, newMeter())
			if err == nil {
				db.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("node %d: %v", i, err)
		}
	}
	var version, xmins int
	pgtest.SQL(t, url, `SELECT schema_version FROM tessera_meta`, &version)
	pgtest.SQL(t, url, `SELECT count(DISTINCT xmin::text) FROM pg_class WHERE relnamespace = current_schema()::regnamespace`, &xmins)
	if files, _ := sqlschema.Migrations(migrationFS); version != len(files) || xmins != 1 {
		t.Errorf("after concurrent opens: version %d by %d transactions, want %d by 1", version, xmins, len(files))
	}
}

// A schema that is missing while writes are refused is not created, and
// nothing of it is.
func TestOpenRefusedWithoutSchema(t *testing.T) {
	url := pgtest.Schema(t)
	_, err := Open(context.Background(), url, spentMeter(t))
	if !isCode(err, tessera.CodeStorageQuotaExhausted) {
		t.Fatalf("open of a new schema while refusing: %v", err)
	}
	var relations int
	pgtest.SQL(t, url, `SELECT count(*) FROM pg_class WHERE relnamespace = current_schema()::regnamespace`, &relations)
	if relations != 0 {
		t.Errorf("the refused open created %d relations", relations)
	}
}

// §13: while writes are refused, an Update is a READ ONLY transaction, so
// PostgreSQL itself refuses every write-capable statement, even those that
// would change nothing, and the refusal is the quota error. Reads work, in
// View and in Update, and so does the meter's ledger.
func TestRefusalIsReadOnly(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Schema(t)
	db := open(t, url, newMeter())
	if err := db.Update(ctx, func(st store.Tx) error {
		if _, err := st.NamespaceEnsure(ctx, "main", epoch); err != nil {
			return err
		}
		return st.TaskInsert(ctx, task("01A"))
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()

	m := spentMeter(t)
	db = open(t, url, m)
	statements := map[string]func(*tx) error{
		"create table if not exists of an existing table": func(t *tx) error {
			_, err := t.exec(ctx, `CREATE TABLE IF NOT EXISTS namespaces (name TEXT PRIMARY KEY)`)
			return err
		},
		"insert on conflict do nothing of an existing row": func(t *tx) error {
			_, err := t.exec(ctx, `INSERT INTO namespaces (name, created_at) VALUES ('main', 0) ON CONFLICT DO NOTHING`)
			return err
		},
		"drop table if exists of a missing table": func(t *tx) error {
			_, err := t.exec(ctx, `DROP TABLE IF EXISTS no_such_table`)
			return err
		},
		"an update of no row": func(t *tx) error {
			_, err := t.exec(ctx, `UPDATE tasks SET version = version WHERE false`)
			return err
		},
		"an ordinary insert": func(t *tx) error {
			_, err := t.NamespaceEnsure(ctx, "other", epoch)
			return err
		},
		"a claim": func(t *tx) error {
			_, err := t.TaskClaim(ctx, store.TaskClaim{Namespace: "main", Queue: "default", Now: epoch,
				Lease: tessera.Lease{RunID: "r", Holder: "p", ExpiresAt: epoch.Add(time.Minute), Seconds: 60}})
			return err
		},
	}
	for name, stmt := range statements {
		err := db.Update(ctx, func(st store.Tx) error { return stmt(st.(*tx)) })
		if !isCode(err, tessera.CodeStorageQuotaExhausted) {
			t.Errorf("%s: %v, want storage_quota_exhausted", name, err)
		}
	}
	// Reads inside an Update still answer: an empty claim's lapse check
	// reads without locking.
	err := db.Update(ctx, func(st store.Tx) error {
		if _, err := st.TaskLapsed(ctx, "main", "default", epoch, 32); err != nil {
			return err
		}
		_, err := st.NamespaceList(ctx, "", 100)
		return err
	})
	if err != nil {
		t.Errorf("read-only work in Update while refusing: %v", err)
	}
	var names []store.Namespace
	if err := db.View(ctx, func(st store.Tx) (err error) { names, err = st.NamespaceList(ctx, "", 100); return err }); err != nil || len(names) != 1 {
		t.Errorf("after refused writes: namespaces %v, %v; want main only", names, err)
	}
	// The ledger is bookkeeping: it writes while everything else is refused.
	if _, err := db.LedgerAdd(ctx, "2030-01-01", 3, 4); err != nil {
		t.Errorf("ledger add while refusing: %v", err)
	}
	if err := db.LedgerSetAllowance(ctx, "2030-01-01", meter.Allowance{RowsWrittenPerDay: 100}); err != nil {
		t.Errorf("ledger allowance while refusing: %v", err)
	}
	// A raised allowance lifts the refusal at once.
	if err := m.SetAllowance(ctx, meter.Allowance{}); err != nil {
		t.Fatal(err)
	}
	if err := db.Update(ctx, func(st store.Tx) error { _, err := st.NamespaceEnsure(ctx, "other", epoch); return err }); err != nil {
		t.Errorf("write after the allowance was raised: %v", err)
	}
}

// §13: a spent read allowance refuses every statement.
func TestReadRefusal(t *testing.T) {
	m := newMeter()
	db := open(t, pgtest.Schema(t), m)
	if err := m.SetAllowance(context.Background(), meter.Allowance{RowsReadPerDay: 1}); err != nil {
		t.Fatal(err)
	}
	m.Add(context.Background(), 0, 1)
	err := db.View(context.Background(), func(tx store.Tx) error { _, err := tx.NamespaceList(context.Background(), "", 1); return err })
	if !isCode(err, tessera.CodeStorageQuotaExhausted) {
		t.Errorf("a read with the read allowance spent: %v", err)
	}
}

// §14 at the seam: rows written are each row version × (1 + the table's
// indexes), a HOT update × 1, the task counts included; rows read are the
// rows statements returned or changed; a rolled-back transaction writes
// nothing.
func TestMeterCountsRows(t *testing.T) {
	ctx, usage := meter.WithUsage(context.Background())
	m := newMeter()
	db := open(t, pgtest.Schema(t), m)
	delta := func(view bool, fn func(store.Tx) error) (written, read int64) {
		t.Helper()
		before := m.Today()
		run := db.Update
		if view {
			run = db.View
		}
		if err := run(ctx, fn); err != nil {
			t.Fatal(err)
		}
		after := m.Today()
		return after.RowsWritten - before.RowsWritten, after.RowsRead - before.RowsRead
	}
	claim := store.TaskClaim{Namespace: "main", Queue: "default", Now: epoch,
		Lease: tessera.Lease{RunID: "r1", Holder: "p", ExpiresAt: epoch.Add(time.Minute), Seconds: 60}}
	cases := []struct {
		name          string
		view          bool
		fn            func(store.Tx) error
		written, read int64
	}{
		// The task and its three index entries (primary key, tasks_ready,
		// tasks_claim: the partial ones counted whole), its queue's counts
		// row (written at commit), two.
		{"first insert", false, func(tx store.Tx) error { return tx.TaskInsert(ctx, task("01A")) }, 4 + 2, 0},
		// The count row exists now: a HOT update of it (1), found through
		// its key (1 read).
		{"second insert", false, func(tx store.Tx) error { return tx.TaskInsert(ctx, task("01B")) }, 4 + 1, 1},
		{"get", true, func(tx store.Tx) error { _, err := tx.TaskGet(ctx, "main", "01A"); return err }, 0, 1},
		{"list", true, func(tx store.Tx) error { _, err := tx.TaskList(ctx, "main", store.TaskFilter{Limit: 10}); return err }, 0, 2},
		// The leased task with its run (a new version in every index),
		// its queue's counts row (HOT).
		{"claim", false, func(tx store.Tx) error { _, err := tx.TaskClaim(ctx, claim); return err }, 4 + 1, 3},
		// The task's sequence, a HOT update (no indexed column changed),
		// and the event; the task row found once. (PostgreSQL's own
		// counters say 2: its key's index still points at the version
		// the claim left, which no statement returns.)
		{"event append", false, func(tx store.Tx) error {
			return tx.TaskEventAppend(ctx, "main", "01A", &tessera.TaskEvent{Kind: tessera.EventNote, By: "p", Time: epoch})
		}, 1 + 2, 1},
		{"counts", true, func(tx store.Tx) error { _, err := tx.TaskStateCounts(ctx, "main", store.AllTasks); return err }, 0, 1},
		// Three finished tasks, a statement each: their counts are summed
		// and written at commit, the queue's row updated once in place
		// (HOT, 1, found through its key: 1 read).
		{"finished inserts", false, func(tx store.Tx) error {
			for _, id := range []string{"01F1", "01F2", "01F3"} {
				f := task(id)
				f.State, f.FinishedAt = tessera.StateSucceeded, &epoch
				if err := tx.TaskInsert(ctx, f); err != nil {
					return err
				}
			}
			return nil
		}, 3*4 + 1, 1},
		// The purge deletes the three in one statement: the tasks with
		// their entries, and the queue's counts row updated once (HOT),
		// not once per task. (Its reads depend on the plans for tiny
		// tables.)
		{"purge", false, func(tx store.Tx) error { _, err := tx.TasksFinishedPurge(ctx, epoch.Add(time.Second), 10); return err }, 3*4 + 1, -1},
	}
	for _, c := range cases {
		w, r := delta(c.view, c.fn)
		if w != c.written || r != c.read && c.read >= 0 {
			t.Errorf("%s: written %d read %d, want %d, %d", c.name, w, r, c.written, c.read)
		}
	}
	if usage.Written.Load() != m.Today().RowsWritten || usage.Read.Load() != m.Today().RowsRead {
		t.Errorf("the request's usage %d/%d differs from the day's %+v", usage.Written.Load(), usage.Read.Load(), m.Today())
	}

	before := m.Today()
	boom := errors.New("boom")
	err := db.Update(ctx, func(tx store.Tx) error {
		if err := tx.TaskInsert(ctx, task("01X")); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if after := m.Today(); after.RowsWritten != before.RowsWritten || after.RowsRead != before.RowsRead {
		t.Errorf("a rolled-back insert metered written %d read %d, want nothing (its counts were never written)",
			after.RowsWritten-before.RowsWritten, after.RowsRead-before.RowsRead)
	}
}

// The listening connection is made again when it drops, tells its
// listener topics may have been missed (store.TopicGap), and hears the
// other nodes' notifications from then on.
func TestListenerReconnects(t *testing.T) {
	url := pgtest.Schema(t)
	a, b := open(t, url, newMeter()), open(t, url, newMeter())
	heard := make(chan string, 100)
	a.Listen(func(topic string) { heard <- topic })
	pid := a.listener.pid.Load()
	var killed bool
	pgtest.SQL(t, url, fmt.Sprintf(`SELECT pg_terminate_backend(%d)`, pid), &killed)
	if !killed {
		t.Fatalf("backend %d was not terminated", pid)
	}
	deadline := time.Now().Add(15 * time.Second)
	gap := false
	for i := 0; ; i++ {
		if err := b.Update(context.Background(), func(tx store.Tx) error { tx.Notify(context.Background(), "ping"); return nil }); err != nil {
			t.Fatal(err)
		}
		select {
		case topic := <-heard:
			if topic == store.TopicGap {
				gap = true
				continue
			}
			if !gap {
				t.Fatalf("heard %q after the reconnect before the gap", topic)
			}
			if n := a.listener.connects.Load(); n != 2 || a.listener.pid.Load() == pid {
				t.Errorf("heard again after %d connections, listening on backend %d (was %d); want 2, another", n, a.listener.pid.Load(), pid)
			}
			return
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing heard in 15 s after the listening backend was terminated (%d pings)", i+1)
		}
	}
}

// Errors the database gives map onto the seam's and the client's.
func TestTranslate(t *testing.T) {
	spent := spentMeter(t)
	pg := func(code string) error { return fmt.Errorf("statement: %w", &pgconn.PgError{Code: code, Message: "x"}) }
	cases := []struct {
		name     string
		err      error
		refusing bool
		is       error
		code     tessera.Code
	}{
		{"serialization failure", pg("40001"), false, store.ErrRetry, tessera.CodeInternal},
		{"deadlock", pg("40P01"), false, store.ErrRetry, tessera.CodeInternal},
		{"unique violation", pg("23505"), false, store.ErrConflict, tessera.CodeInternal},
		{"read-only transaction while refusing", pg("25006"), true, nil, tessera.CodeStorageQuotaExhausted},
		{"read-only server", pg("25006"), false, nil, tessera.CodeUnavailable},
		{"disk full", pg("53100"), false, nil, tessera.CodeUnavailable},
		{"too many connections", pg("53300"), false, nil, tessera.CodeUnavailable},
		{"connection failure", pg("08006"), false, nil, tessera.CodeUnavailable},
		{"admin shutdown", pg("57P01"), false, nil, tessera.CodeUnavailable},
		{"a NUL in text", pg("22021"), false, nil, tessera.CodeInvalidRequest},
		{"a broken connection", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), false, nil, tessera.CodeUnavailable},
		{"an undefined table", pg("42P01"), false, nil, tessera.CodeInternal},
	}
	for _, c := range cases {
		got := translate(c.err, c.refusing, spent)
		if c.is != nil && !errors.Is(got, c.is) {
			t.Errorf("%s: %v, want %v", c.name, got, c.is)
		}
		if !isCode(got, c.code) {
			t.Errorf("%s: %v, want code %s", c.name, got, c.code)
		}
		var u *store.UnavailableError
		if c.code == tessera.CodeUnavailable && (!errors.As(got, &u) || u.RetryAfter <= 0) {
			t.Errorf("%s: %v carries no Retry-After", c.name, got)
		}
	}
}

// A server that cannot be reached, or a connection that breaks in the
// middle of a transaction, is unavailable (503 with Retry-After), never an
// internal error; the pool replaces the broken connection.
func TestConnectionFailuresAreUnavailable(t *testing.T) {
	_, err := Open(context.Background(), "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=2", newMeter())
	if !isCode(err, tessera.CodeUnavailable) {
		t.Errorf("open of an unreachable server: %v, want unavailable", err)
	}
	db := open(t, pgtest.Schema(t), newMeter())
	err = db.Update(context.Background(), func(st store.Tx) error {
		_, err := st.(*tx).exec(context.Background(), `SELECT pg_terminate_backend(pg_backend_pid())`)
		return err
	})
	if !isCode(err, tessera.CodeUnavailable) {
		t.Errorf("a transaction whose connection was terminated: %v, want unavailable", err)
	}
	if err := db.Update(context.Background(), func(st store.Tx) error { return st.TaskInsert(context.Background(), task("01A")) }); err != nil {
		t.Errorf("the next transaction: %v", err)
	}
}

// Text PostgreSQL cannot hold is the client's invalid request, and the
// transaction rolls back whole.
func TestNULInTextIsInvalid(t *testing.T) {
	db := open(t, pgtest.Schema(t), newMeter())
	bad := task("01A")
	bad.Title = "a\x00b"
	err := db.Update(context.Background(), func(st store.Tx) error { return st.TaskInsert(context.Background(), bad) })
	if !isCode(err, tessera.CodeInvalidRequest) {
		t.Errorf("a title holding NUL: %v, want invalid_request", err)
	}
}

// A pooled connection whose backend is gone — the server restarted, or
// an operator ended it — fails the first transaction that draws it before
// anything of it reaches a live backend. That transaction is run again on
// a connection that answers, once: no request is answered 503 for it,
// and each transaction's write is there once.
func TestStaleConnectionsAreRetried(t *testing.T) {
	const conns = 4
	url := pgtest.Schema(t)
	db := open(t, fmt.Sprintf("%s&pool_max_conns=%d", url, conns), newMeter())
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	// Every connection of the pool in use at once, then idle: the pool
	// pings none of them before handing it out again for a second.
	pids := make(chan uint32, conns)
	var started sync.WaitGroup
	started.Add(conns)
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			err := db.View(ctx, func(st store.Tx) error {
				pids <- st.(*tx).c.PgConn().PID()
				started.Done()
				started.Wait()
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	close(pids)
	var backends []int32
	for pid := range pids {
		backends = append(backends, int32(pid))
	}
	var ended int
	if err := admin.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(p, 5000)) FROM unnest($1::int4[]) p`, backends).Scan(&ended); err != nil || ended != conns {
		t.Fatalf("terminated %d of the pool's %d backends: %v", ended, conns, err)
	}
	for i := range conns {
		id := fmt.Sprintf("01S%d", i)
		if err := db.Update(ctx, func(st store.Tx) error { return st.TaskInsert(ctx, task(id)) }); err != nil {
			t.Errorf("transaction %d after the pool's backends ended: %v", i+1, err)
		}
	}
	var tasks int
	pgtest.SQL(t, url, `SELECT count(*) FROM tasks`, &tasks)
	if tasks != conns {
		t.Errorf("%d tasks stored by %d transactions, want one each", tasks, conns)
	}
}

// A connection that breaks once its COMMIT may have reached the server is
// not retried — the commit may have happened — and the answer says so:
// 503, outcome unknown, retry with the same Idempotency-Key.
func TestBrokenCommitIsNotRetried(t *testing.T) {
	url := pgtest.Schema(t)
	db := open(t, url, newMeter())
	// A deferred trigger ends its own backend when the commit runs it.
	pgtest.SQL(t, url, `CREATE TABLE doomed (id int)`)
	pgtest.SQL(t, url, `CREATE FUNCTION end_backend() RETURNS trigger LANGUAGE plpgsql AS
 $$ BEGIN PERFORM pg_terminate_backend(pg_backend_pid()); RETURN NULL; END $$`)
	pgtest.SQL(t, url, `CREATE CONSTRAINT TRIGGER doomed AFTER INSERT ON doomed DEFERRABLE INITIALLY DEFERRED
 FOR EACH ROW EXECUTE FUNCTION end_backend()`)
	runs := 0
	err := db.Update(context.Background(), func(st store.Tx) error {
		runs++
		_, err := st.(*tx).exec(context.Background(), `INSERT INTO doomed VALUES (1)`)
		return err
	})
	var u *store.UnavailableError
	if !errors.As(err, &u) || u.RetryAfter <= 0 ||
		!strings.Contains(u.Message, "outcome unknown; retry with the same Idempotency-Key") {
		t.Errorf("a commit whose connection broke: %v, want unavailable, outcome unknown", err)
	}
	if runs != 1 {
		t.Errorf("the transaction ran %d times, want once", runs)
	}
}

// The store's connections keep the planner off sequential scans and never
// compile with JIT (Open says why), unless the URL sets either itself.
func TestSessionsSeekWithoutJIT(t *testing.T) {
	url := pgtest.Schema(t)
	for _, tc := range []struct{ url, seqscan, jit string }{
		{url, "off", "off"},
		{url + "&jit=on", "off", "on"},
	} {
		db := open(t, tc.url, newMeter())
		var seqscan, jit string
		if err := db.pool.QueryRow(context.Background(), `SELECT current_setting('enable_seqscan'), current_setting('jit')`).Scan(&seqscan, &jit); err != nil {
			t.Fatal(err)
		}
		if seqscan != tc.seqscan || jit != tc.jit {
			t.Errorf("%s: enable_seqscan %s, jit %s; want %s, %s", tc.url, seqscan, jit, tc.seqscan, tc.jit)
		}
	}
}

// A node alone sends no notifications once the answers to its hello are
// in; a node that starts hears a gap from it (the topics it skipped may
// have concerned the newcomer's sleepers), then every topic; and each
// counts the other as a peer.
func TestLoneNodeSendsNothing(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Schema(t)
	probe := WithListenerProbe(100*time.Millisecond, 200*time.Millisecond)
	a := open(t, url, newMeter(), probe)
	ping := func(db *DB, topic string) {
		t.Helper()
		if err := db.Update(ctx, func(tx store.Tx) error { tx.Notify(ctx, topic); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond) // past the deadline for answers to a's hello
	sent := a.ListenerStats().Sent
	for range 5 {
		ping(a, "alone")
	}
	time.Sleep(50 * time.Millisecond)
	if got := a.ListenerStats(); got.Sent != sent || got.Peers != 0 {
		t.Fatalf("a node alone sent %d notifications for 5 commits and counts %d peers, want 0 and 0", got.Sent-sent, got.Peers)
	}

	// b listens from its start: a's gap answers b's hello, and may come
	// before Open returns.
	heard := make(chan string, 100)
	listening := func(db *DB) { db.Listen(func(topic string) { heard <- topic }) }
	b := open(t, url, newMeter(), probe, listening)
	eventually := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 5 s", what)
			}
		}
	}
	eventually("a hears b's hello", func() bool { return a.ListenerStats().Peers == 1 })
	eventually("b hears a's answer", func() bool { return b.ListenerStats().Peers == 1 })
	ping(a, "together")
	var got []string
	for topic := range heard {
		got = append(got, topic)
		if topic == "together" {
			break
		}
	}
	if want := []string{store.TopicGap, "together"}; !slices.Equal(got, want) {
		t.Errorf("b heard %q from a, want %q", got, want)
	}
}
