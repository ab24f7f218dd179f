package sqlite

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// The driver comparison the throughput issue asks for, once the engine
// dominated the profile: the statements the committer ran for a number of
// lifecycles, recorded from the real store under concurrent load (so with
// its group commits and savepoints), replayed on one connection from one
// goroutine against each SQLite driver this test binary has. Each replay
// starts from a copy of the store as it was before the recording and must
// end with the same rows as the store itself (TestReplayIsFaithful), so a
// faster replay cannot be one that did less. The ncruces driver is always
// here, bare and through the committer's own metered connection;
// mattn/go-sqlite3, the cgo driver, with -tags cgosqlite (replay_cgo_test.go):
//
//	go test -tags cgosqlite -run '^$' -bench Replay -benchtime 20x ./internal/store/sqlite/

// statement is one statement the writer ran, with its arguments as the
// store bound them.
type statement struct {
	sql     string
	args    []any
	control bool
}

// workload is a recording: the store file before it, the writer's
// statements, and the digest of the store's rows after them.
type workload struct {
	base   string
	stmts  []statement
	tasks  int
	digest string
}

// replayer runs statements on one connection, reading every row and
// column a statement returns, as the store reads them.
type replayer interface {
	run(st statement) error
	close() error
}

// replayers are the drivers a replay can use, by name.
var replayers = map[string]func(path string) (replayer, error){
	"ncruces":         openBareReplayer,
	"ncruces-metered": openMeteredReplayer,
}

// replayPragmas are the committer's: WAL, and synchronous=NORMAL, under
// which its COMMIT writes the WAL without an fsync (the syncer does that
// apart, durable.go) and checkpoints still sync.
const replayPragmas = "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA temp_store = MEMORY;"

// recordLifecycles runs tasks lifecycles through the core from workers
// goroutines and records what the writer ran for them.
func recordLifecycles(tb testing.TB, tasks, workers int) workload {
	tb.Helper()
	ctx := context.Background()
	dir := tb.TempDir()
	path := filepath.Join(dir, "t.db")
	clock := tessera.SystemClock{}
	m := meter.New(clock)
	db, err := Open(ctx, path, m)
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	cfg := core.DefaultConfig()
	cfg.ClaimRate, cfg.ClaimBurst, cfg.ClaimConcurrency = 1e9, 1e9, 1e6
	svc, a := adminService(tb, db, m, clock, cfg)
	defer svc.Close()

	w := workload{base: filepath.Join(dir, "base.db"), tasks: tasks}
	snapshot(tb, path, w.base)
	var mu sync.Mutex
	traceSQL = func(c *conn, sql string, args []any, control bool) {
		if c != db.writer {
			return
		}
		mu.Lock()
		w.stmts = append(w.stmts, statement{sql: sql, args: slices.Clone(args), control: control})
		mu.Unlock()
	}
	var wg sync.WaitGroup
	var left atomic.Int64
	left.Store(int64(tasks))
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				if err := lifecycle(ctx, svc, a); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	traceSQL = nil
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
	w.digest = digest(tb, path)
	return w
}

// snapshot writes a consistent copy of the store at path to dst.
func snapshot(tb testing.TB, path, dst string) {
	tb.Helper()
	c, err := sqlite3.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	if err := c.Exec(fmt.Sprintf("VACUUM INTO '%s'", strings.ReplaceAll(dst, "'", "''"))); err != nil {
		tb.Fatal(err)
	}
}

// digest hashes every row of every table but the meter's ledger, which
// the committer books outside any traced statement.
func digest(tb testing.TB, path string) string {
	tb.Helper()
	c, err := sqlite3.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	var tables []string
	err = rawQuery(c, `SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name != 'meter_days' ORDER BY name`,
		func(s *sqlite3.Stmt) { tables = append(tables, s.ColumnText(0)) })
	if err != nil {
		tb.Fatal(err)
	}
	h := sha256.New()
	for _, t := range tables {
		var cols int
		if err := rawQuery(c, `SELECT count(*) FROM pragma_table_info(?)`, func(s *sqlite3.Stmt) { cols = s.ColumnInt(0) }, t); err != nil {
			tb.Fatal(err)
		}
		order := make([]string, cols)
		for i := range order {
			order[i] = fmt.Sprint(i + 1)
		}
		rows := 0
		err := rawQuery(c, fmt.Sprintf(`SELECT * FROM "%s" ORDER BY %s`, t, strings.Join(order, ", ")), func(s *sqlite3.Stmt) {
			rows++
			for i := range cols {
				fmt.Fprintf(h, "%d:%q|", s.ColumnType(i), s.ColumnText(i))
			}
			io.WriteString(h, "\n")
		})
		if err != nil {
			tb.Fatal(err)
		}
		fmt.Fprintf(h, "%s %d rows\n", t, rows)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// replay runs w on a fresh copy of its base through the named driver and
// returns the copy's path.
func replay(tb testing.TB, w workload, driver string, timed func(run func())) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), driver+".db")
	copyFile(tb, w.base, path)
	r, err := replayers[driver](path)
	if err != nil {
		tb.Fatal(err)
	}
	timed(func() {
		for _, st := range w.stmts {
			if err = r.run(st); err != nil {
				err = fmt.Errorf("%s: %q: %w", driver, firstLine(st.sql), err)
				return
			}
		}
	})
	if err := r.close(); err != nil {
		tb.Fatal(err)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return path
}

func replayerNames() []string {
	return slices.Sorted(maps.Keys(replayers))
}

func copyFile(tb testing.TB, src, dst string) {
	tb.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		tb.Fatal(err)
	}
}

// TestReplayIsFaithful replays a recording of 200 lifecycles on every
// driver and checks that each ends with exactly the store's rows.
func TestReplayIsFaithful(t *testing.T) {
	w := recordLifecycles(t, 200, 8)
	if got := digest(t, w.base); got == w.digest {
		t.Fatal("the base already holds the recorded work; the digest cannot tell a replay that did nothing")
	}
	for _, name := range replayerNames() {
		t.Run(name, func(t *testing.T) {
			path := replay(t, w, name, func(run func()) { run() })
			if got := digest(t, path); got != w.digest {
				t.Errorf("replay through %s left digest %s, the store %s", name, got, w.digest)
			}
		})
	}
}

// BenchmarkReplay replays 2,000 lifecycles recorded at 16 workers through
// each driver: ns/task is the committer's engine time for a task's four
// writes, with no HTTP, no core and no waiting around it.
func BenchmarkReplay(b *testing.B) {
	w := recordLifecycles(b, 2000, 16)
	commits := 0
	for _, st := range w.stmts {
		if st.sql == "COMMIT" {
			commits++
		}
	}
	for _, name := range replayerNames() {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.ResetTimer()
			var cpu time.Duration
			measured := false
			for range b.N {
				b.StopTimer()
				replay(b, w, name, func(run func()) {
					// The thread's own CPU time, beside the wall time: on a
					// machine other work shares, only the first is the
					// replay's.
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					b.StartTimer()
					c0, ok0 := threadCPU()
					run()
					c1, ok1 := threadCPU()
					b.StopTimer()
					if measured = ok0 && ok1; measured {
						cpu += c1 - c0
					}
				})
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*w.tasks), "ns/task")
			if measured {
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*w.tasks), "cpu-ns/task")
			}
			b.ReportMetric(float64(len(w.stmts))/float64(w.tasks), "statements/task")
			b.ReportMetric(float64(commits)/float64(w.tasks), "commits/task")
		})
	}
}

// threadCPU is the CPU time the calling thread has used, where the
// system tells it (Linux's RUSAGE_THREAD); the caller keeps its goroutine
// on the thread.
func threadCPU() (time.Duration, bool) {
	const rusageThread = 1
	var ru syscall.Rusage
	if runtime.GOOS != "linux" || syscall.Getrusage(rusageThread, &ru) != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

// connReplayer runs statements on the store's own connection type, which
// keeps each statement prepared. Bare, it binds and steps them with
// nothing around; metered, it runs them as the committer does — the
// preupdate hook counting rows written, the statement counters counting
// rows read, the allowance check.
type connReplayer struct {
	c       *conn
	metered bool
}

func openBareReplayer(path string) (replayer, error) { return openConnReplayer(path, false) }

func openMeteredReplayer(path string) (replayer, error) { return openConnReplayer(path, true) }

func openConnReplayer(path string, metered bool) (replayer, error) {
	c, err := openConn(path, false)
	if err != nil {
		return nil, err
	}
	if metered {
		if c.indexes, err = readIndexes(c.c); err != nil {
			c.close()
			return nil, err
		}
		c.c.PreUpdateHook(c.countWrite)
	}
	if err := c.c.Exec(replayPragmas); err != nil {
		c.close()
		return nil, err
	}
	return &connReplayer{c: c, metered: metered}, nil
}

func (r *connReplayer) run(st statement) error {
	if r.metered {
		if st.control {
			return r.c.control(st.sql)
		}
		return r.c.query(context.Background(), st.sql, st.args, func(s *sqlite3.Stmt) error {
			readColumns(s)
			return nil
		})
	}
	s, err := r.c.prepare(st.sql)
	if err != nil {
		return err
	}
	if err := bind(s, st.args); err != nil {
		return err
	}
	for s.Step() {
		readColumns(s)
	}
	return errors.Join(s.Err(), s.Reset())
}

func (r *connReplayer) close() error { return r.c.close() }

// readColumns reads each column of the current row by its type, as a
// scan into Go values does.
func readColumns(s *sqlite3.Stmt) {
	for i := range s.ColumnCount() {
		switch s.ColumnType(i) {
		case sqlite3.INTEGER:
			_ = s.ColumnInt64(i)
		case sqlite3.FLOAT:
			_ = s.ColumnFloat(i)
		case sqlite3.TEXT:
			_ = s.ColumnText(i)
		case sqlite3.BLOB:
			_ = s.ColumnBlob(i, nil)
		}
	}
}
