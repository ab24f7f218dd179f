package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/store/postgres/pgtest"
)

// Several nodes on one PostgreSQL database (SPEC §2, issue 11): real
// binaries, any node serving any request, and every promise holding
// across them.

// startNodes starts n `tessera serve` processes on the PostgreSQL schema
// at url, each with a data directory of its own, claim admission raised so
// the tests measure the store, not the bucket.
func startNodes(t *testing.T, bin, url string, n int, env ...string) []*server {
	t.Helper()
	env = append(env, "TESSERA_STORE="+url, "TESSERA_ADMIN_KEY="+crashAdminKey,
		"TESSERA_CLAIM_RATE=100000", "TESSERA_CLAIM_BURST=100000", "TESSERA_CLAIM_CONCURRENCY=1000")
	var nodes []*server
	for range n {
		nodes = append(nodes, startServer(t, bin, t.TempDir(), env...))
	}
	return nodes
}

type nodeLease struct {
	Lease struct {
		TaskID string `json:"task_id"`
		Token  string `json:"token"`
	} `json:"lease"`
	Task wireTask `json:"task"`
}

// 16 workers spread over two nodes work 2,000 tasks: every task is done,
// none is leased twice, none is lost.
func TestNodesWorkOneQueueTogether(t *testing.T) {
	url := pgtest.Schema(t)
	bin := buildTessera(t)
	nodes := startNodes(t, bin, url, 2)
	const tasks, workers = 2000, 16
	var ids sync.Map
	for b := range tasks / 500 {
		batch := make([]map[string]any, 500)
		for i := range batch {
			batch[i] = map[string]any{"title": fmt.Sprint("task ", b*500+i)}
		}
		var out struct {
			Tasks []wireTask `json:"tasks"`
		}
		nodes[b%2].must(201, "POST", "/v1/tasks/batch", crashAdminKey, map[string]any{"tasks": batch}, &out)
		for _, task := range out.Tasks {
			ids.Store(task.ID, true)
		}
	}

	var mu sync.Mutex
	granted := map[string]int{}
	var done atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		node := nodes[w%2]
		wg.Go(func() {
			for done.Load() < tasks {
				status, b, err := node.call("POST", "/v1/claims", crashAdminKey, map[string]any{"queue": "default", "wait_seconds": 1})
				if err != nil {
					t.Error(err)
					return
				}
				if status == http.StatusNoContent {
					continue
				}
				var c nodeLease
				if status != 200 || json.Unmarshal(b, &c) != nil {
					t.Errorf("claim: %d %s", status, b)
					return
				}
				mu.Lock()
				granted[c.Lease.TaskID]++
				mu.Unlock()
				status, b, err = node.call("POST", "/v1/claims/"+c.Lease.TaskID+"/submit", crashAdminKey,
					map[string]any{"lease_token": c.Lease.Token, "outcome": "succeeded"})
				if err != nil || status != 200 {
					t.Errorf("submit: %d %s %v", status, b, err)
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	for id, n := range granted {
		if n != 1 {
			t.Errorf("task %s was granted %d times", id, n)
		}
	}
	all := nodes[0].allTasks(crashAdminKey)
	lost := 0
	ids.Range(func(k, _ any) bool {
		if all[k.(string)].State != "succeeded" {
			lost++
		}
		return true
	})
	if len(granted) != tasks || lost != 0 || len(all) != tasks {
		t.Errorf("%d tasks granted, %d listed, %d not succeeded; want %d, %d, 0", len(granted), len(all), lost, tasks, tasks)
	}
	// The store agrees: one run per task.
	for id := range granted {
		var task struct {
			Runs []json.RawMessage `json:"runs"`
		}
		nodes[1].must(200, "GET", "/v1/tasks/"+id, crashAdminKey, nil, &task)
		if len(task.Runs) != 1 {
			t.Fatalf("task %s has %d runs", id, len(task.Runs))
		}
	}
}

// A node killed mid-run loses nothing it acknowledged; the leases it
// granted lapse and are claimed again through the other node.
func TestNodeKilledMidRun(t *testing.T) {
	url := pgtest.Schema(t)
	bin := buildTessera(t)
	nodes := startNodes(t, bin, url, 2)
	a, b := nodes[0], nodes[1]
	var acked []string
	for i := range 20 {
		var task wireTask
		a.must(201, "POST", "/v1/tasks", crashAdminKey, map[string]any{"title": fmt.Sprint("task ", i)}, &task)
		acked = append(acked, task.ID)
	}
	var held []string
	for range 5 {
		var c nodeLease
		a.must(200, "POST", "/v1/claims", crashAdminKey, map[string]any{"lease_seconds": 10}, &c)
		held = append(held, c.Lease.TaskID)
	}
	a.kill()

	all := b.allTasks(crashAdminKey)
	for _, id := range acked {
		if _, ok := all[id]; !ok {
			t.Errorf("task %s, acknowledged by the killed node, is gone", id)
		}
	}
	for _, id := range held {
		if all[id].State != "leased" {
			t.Errorf("task %s held through the killed node is %s", id, all[id].State)
		}
	}
	// Once the leases run out, the other node's claims take the tasks
	// again (after their backoff: a lapse uses an attempt).
	deadline := time.Now().Add(90 * time.Second)
	again := map[string]bool{}
	for len(again) < len(held) && time.Now().Before(deadline) {
		status, body, err := b.call("POST", "/v1/claims", crashAdminKey, map[string]any{"wait_seconds": 1, "lease_seconds": 60})
		if err != nil {
			t.Fatal(err)
		}
		if status != 200 {
			continue
		}
		var c nodeLease
		if err := json.Unmarshal(body, &c); err != nil {
			t.Fatal(err)
		}
		if slices.Contains(held, c.Lease.TaskID) {
			if c.Task.Attempts != 2 {
				t.Errorf("re-claimed task %s is on attempt %d, want 2", c.Lease.TaskID, c.Task.Attempts)
			}
			again[c.Lease.TaskID] = true
		}
	}
	if len(again) != len(held) {
		t.Errorf("%d of the %d leases of the killed node were claimed again through the other", len(again), len(held))
	}
}

// Wake-ups, snapshot drops, revocations and the allowance cross nodes.
func TestNodesShareSignalsAndTheAllowance(t *testing.T) {
	url := pgtest.Schema(t)
	bin := buildTessera(t)
	nodes := startNodes(t, bin, url, 2)
	a, b := nodes[0], nodes[1]

	t.Run("a long-poll on A wakes at an enqueue on B", func(t *testing.T) {
		a.must(204, "POST", "/v1/claims", crashAdminKey, map[string]any{"queue": "wake"}, nil)
		woke := make(chan time.Time, 1)
		go func() {
			status, body, err := a.call("POST", "/v1/claims", crashAdminKey, map[string]any{"queue": "wake", "wait_seconds": 15})
			if err != nil || status != 200 {
				t.Errorf("long-poll: %d %s %v", status, body, err)
			}
			woke <- time.Now()
		}()
		time.Sleep(500 * time.Millisecond) // the long-poll is waiting
		enqueued := time.Now()
		b.must(201, "POST", "/v1/tasks", crashAdminKey, map[string]any{"title": "wake up", "queue": "wake"}, nil)
		select {
		case at := <-woke:
			// Without a cross-node wake-up it would answer at its 15 s.
			t.Logf("the long-poll on A answered %s after the enqueue was sent to B", at.Sub(enqueued).Round(time.Millisecond))
		case <-time.After(10 * time.Second):
			t.Fatal("a long-poll on node A did not wake at an enqueue on node B")
		}
	})

	t.Run("a snapshot on A is dropped by a change on B", func(t *testing.T) {
		health := func(n *server) int {
			var h struct {
				Totals struct {
					Counts map[string]int `json:"counts"`
				} `json:"totals"`
			}
			n.must(200, "GET", "/v1/health", crashAdminKey, nil, &h)
			return h.Totals.Counts["ready"]
		}
		before := health(a)
		b.must(201, "POST", "/v1/tasks", crashAdminKey, map[string]any{"title": "public", "public": true}, nil)
		deadline := time.Now().Add(5 * time.Second) // well inside the snapshot's 15 s
		for health(a) != before+1 {
			if time.Now().After(deadline) {
				t.Fatalf("node A's health still shows %d ready public tasks after an enqueue on B", before)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})

	t.Run("a key revoked on A is refused on B", func(t *testing.T) {
		var p struct {
			ID string `json:"id"`
		}
		a.must(201, "POST", "/v1/admin/principals", crashAdminKey, map[string]any{"kind": "agent"}, &p)
		var k struct {
			ID  string `json:"id"`
			Key string `json:"key"`
		}
		a.must(201, "POST", "/v1/admin/keys", crashAdminKey, map[string]any{"principal_id": p.ID, "scopes": []string{"namespace:main", "read"}}, &k)
		b.must(200, "GET", "/v1/me", k.Key, nil, nil) // cached on B
		a.must(204, "DELETE", "/v1/admin/keys/"+k.ID, crashAdminKey, nil, nil)
		revoked := time.Now()
		for {
			status, _, err := b.call("GET", "/v1/me", k.Key, nil)
			if err != nil {
				t.Fatal(err)
			}
			if status == http.StatusUnauthorized {
				t.Logf("node B refused the key %s after its revocation on A", time.Since(revoked).Round(time.Millisecond))
				break
			}
			if time.Since(revoked) > 5*time.Second {
				t.Fatal("node B still accepts a key revoked on A after 5 s")
			}
			time.Sleep(20 * time.Millisecond)
		}
	})

	t.Run("the allowance spent through A refuses writes on B", func(t *testing.T) {
		var storage struct {
			RowsWritten int64 `json:"rows_written"`
		}
		a.must(200, "GET", "/v1/admin/storage", crashAdminKey, nil, &storage)
		a.must(200, "PUT", "/v1/admin/storage/allowance", crashAdminKey,
			map[string]any{"rows_written_per_day": storage.RowsWritten + 200, "rows_read_per_day": 0}, nil)
		// Spend it through A alone.
		for i := 0; ; i++ {
			status, body, err := a.call("POST", "/v1/tasks", crashAdminKey, map[string]any{"title": "spend"})
			if err != nil {
				t.Fatal(err)
			}
			if status == http.StatusServiceUnavailable {
				break
			}
			if status != 201 || i > 1000 {
				t.Fatalf("spending the allowance through A: %d %s", status, body)
			}
		}
		// B learns the day's totals at its next sync (every 2 s).
		deadline := time.Now().Add(10 * time.Second)
		for {
			status, body, err := b.call("POST", "/v1/tasks", crashAdminKey, map[string]any{"title": "on B"})
			if err != nil {
				t.Fatal(err)
			}
			if status == http.StatusServiceUnavailable && strings.Contains(string(body), "storage_quota_exhausted") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node B still writes after the allowance was spent through A: %d %s", status, body)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}
