package core_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/store/postgres"
	"github.com/tessera-dev/tessera/internal/store/postgres/pgtest"
	"github.com/tessera-dev/tessera/internal/store/sqlite"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// node is one server's core over a store, and an admin actor on it.
type node struct {
	svc   *core.Service
	actor *auth.Actor
	db    store.Store
}

// openNodes returns n nodes on one store: SQLite (n = 1) or a PostgreSQL
// schema each node opens on its own, as several servers do.
func openNodes(t testing.TB, backend string, n int) []node {
	t.Helper()
	ctx := context.Background()
	cfg := core.DefaultConfig()
	cfg.ClaimRate, cfg.ClaimBurst, cfg.ClaimConcurrency = 1e6, 1e6, 1e6
	url := ""
	if backend == "postgres" {
		url = pgtest.Schema(t)
	}
	dir := t.TempDir()
	var key string
	var out []node
	for i := range n {
		m := meter.New(tessera.SystemClock{})
		var db store.Store
		var err error
		if backend == "postgres" {
			db, err = postgres.Open(ctx, url, m)
		} else {
			db, err = sqlite.Open(ctx, filepath.Join(dir, "t.db"), m)
		}
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if key, err = core.CreateAdminKey(ctx, db, tessera.SystemClock{}, "", "admin"); err != nil {
				t.Fatal(err)
			}
		}
		authn := auth.NewAuthenticator(db, tessera.SystemClock{}, time.Hour)
		svc := core.New(db, authn, m, tessera.SystemClock{}, cfg)
		a, err := authn.Authenticate(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { svc.Close(); db.Close() })
		out = append(out, node{svc: svc, actor: a, db: db})
	}
	return out
}

// Sixteen workers over a random graph of 2,000 tasks: every task runs
// once, none is lost, and none starts before each of its parents ended,
// as the runs stored in the database say — on SQLite, and on two
// PostgreSQL nodes whose workers claim and submit on either.
func TestRandomGraphRunsInOrder(t *testing.T) {
	for _, c := range []struct {
		backend string
		nodes   int
	}{{"sqlite", 1}, {"postgres", 2}} {
		t.Run(fmt.Sprintf("%s, %d nodes", c.backend, c.nodes), func(t *testing.T) {
			runRandomGraph(t, openNodes(t, c.backend, c.nodes))
		})
	}
}

func runRandomGraph(t *testing.T, nodes []node) {
	const tasks, workers = 2000, 16
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 11))
	parents := make([][]int, tasks) // by index: the earlier tasks it waits on
	ids := make([]string, tasks)
	for start := 0; start < tasks; start += core.MaxBatchTasks {
		var batch []core.EnqueueParams
		for i := start; i < min(start+core.MaxBatchTasks, tasks); i++ {
			p := core.EnqueueParams{Title: fmt.Sprint("t", i), Queue: "dag", Ref: fmt.Sprint("r", i)}
			for range rng.IntN(4) {
				if i == 0 {
					break
				}
				j := rng.IntN(i)
				parents[i] = append(parents[i], j)
				if j >= start {
					p.After = append(p.After, fmt.Sprint("r", j)) // a task of this batch, by ref
				} else {
					p.After = append(p.After, ids[j])
				}
			}
			batch = append(batch, p)
		}
		out, err := nodes[0].svc.EnqueueBatch(ctx, nodes[0].actor, "main", batch, "")
		if err != nil {
			t.Fatal(err)
		}
		for k, task := range out.Tasks {
			ids[start+k] = task.ID
		}
	}

	var done atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	deadline := time.Now().Add(3 * time.Minute)
	for w := range workers {
		n := nodes[w%len(nodes)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for done.Load() < tasks && time.Now().Before(deadline) {
				c, err := n.svc.Claim(ctx, n.actor, "main", core.ClaimParams{Queue: "dag", LeaseSeconds: 600, WaitSeconds: 1})
				if err != nil {
					errs <- err
					return
				}
				if c.Lease == nil {
					continue
				}
				if _, err := n.svc.Submit(ctx, n.actor, "main", c.Task.ID, core.SubmitParams{LeaseToken: c.Lease.Token, Outcome: "succeeded"}, ""); err != nil {
					errs <- err
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := done.Load(); got != tasks {
		t.Fatalf("%d of %d tasks run", got, tasks)
	}

	// The database's own account: one succeeded run per task, started no
	// earlier than every parent's run ended.
	ended, started := make([]time.Time, tasks), make([]time.Time, tasks)
	err := nodes[0].db.View(ctx, func(tx store.Tx) error {
		for i, id := range ids {
			task, err := tx.TaskGet(ctx, "main", id)
			if err != nil {
				return err
			}
			runs, err := tx.RunList(ctx, "main", id)
			if err != nil {
				return err
			}
			if task.State != tessera.StateSucceeded || len(runs) != 1 || runs[0].Outcome != tessera.OutcomeSucceeded || runs[0].EndedAt == nil {
				return fmt.Errorf("task %d: %s with runs %+v", i, task.State, runs)
			}
			started[i], ended[i] = runs[0].StartedAt, *runs[0].EndedAt
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	edges := 0
	for i := range tasks {
		for _, j := range parents[i] {
			edges++
			if started[i].Before(ended[j]) {
				t.Errorf("task %d started at %s, before its parent %d ended at %s", i, started[i], j, ended[j])
			}
		}
	}
	t.Logf("%d tasks, %d edges, %d workers on %d nodes", tasks, edges, workers, len(nodes))
}

// BenchmarkSettleTenThousandChildren measures what a parent of 10,000
// children costs when it succeeds: its submit (which settles the first
// 100 in its own transaction), and the time until the dependency worker,
// 100 a transaction, has made every child ready.
//
//	go test -run '^$' -bench SettleTenThousand -benchtime 1x ./internal/core/
func BenchmarkSettleTenThousandChildren(b *testing.B) {
	for _, backend := range []string{"sqlite", "postgres"} {
		b.Run(backend, func(b *testing.B) {
			ctx := context.Background()
			for range b.N {
				b.StopTimer()
				n := openNodes(b, backend, 1)[0]
				parent, err := n.svc.Enqueue(ctx, n.actor, "main", core.EnqueueParams{Title: "parent", Queue: "p"}, "")
				if err != nil {
					b.Fatal(err)
				}
				const children = 10_000
				for start := 0; start < children; start += core.MaxBatchTasks {
					batch := make([]core.EnqueueParams, core.MaxBatchTasks)
					for i := range batch {
						batch[i] = core.EnqueueParams{Title: "child", Queue: "kids", After: []string{parent.ID}}
					}
					if _, err := n.svc.EnqueueBatch(ctx, n.actor, "main", batch, ""); err != nil {
						b.Fatal(err)
					}
				}
				c, err := n.svc.Claim(ctx, n.actor, "main", core.ClaimParams{Queue: "p"})
				if err != nil || c.Lease == nil {
					b.Fatal(c, err)
				}
				b.StartTimer()
				start := time.Now()
				if _, err := n.svc.Submit(ctx, n.actor, "main", c.Task.ID, core.SubmitParams{LeaseToken: c.Lease.Token, Outcome: "succeeded"}, ""); err != nil {
					b.Fatal(err)
				}
				submit := time.Since(start)
				for {
					counts, err := n.svc.Counts(ctx, n.actor, "main")
					if err != nil {
						b.Fatal(err)
					}
					if counts["kids"]["ready"] == children {
						break
					}
					time.Sleep(5 * time.Millisecond)
				}
				b.ReportMetric(float64(submit.Milliseconds()), "submit_ms")
				b.ReportMetric(float64(time.Since(start).Milliseconds()), "all_ready_ms")
			}
		})
	}
}
