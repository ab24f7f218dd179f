package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// Claim atomicity (SPEC §6): many workers racing over one queue never get
// the same task, and every task is done exactly once.
func TestClaimAtomicityConcurrentWorkers(t *testing.T) {
	const (
		tasks   = 200
		workers = 50
		keys    = 5
	)
	s := newTestServer(t, func(c *core.Config) {
		c.ClaimRate, c.ClaimBurst, c.ClaimConcurrency = 100000, 100000, workers
	})
	producer, _ := s.newKey("service", "namespace:main", "enqueue", "read")
	var workerKeys []string
	for range keys {
		k, _ := s.newKey("agent", "namespace:main", "claim")
		workerKeys = append(workerKeys, k)
	}
	want := map[string]bool{}
	for i := range tasks {
		want[s.enqueue("main", producer, map[string]any{"queue": "race", "title": fmt.Sprint("task ", i)}).ID] = true
	}

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	defer client.CloseIdleConnections()
	var (
		mu      sync.Mutex
		claims  = map[string]int{} // task id → times granted
		runs    = map[string]bool{}
		workErr error
		wg      sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		if workErr == nil {
			workErr = err
		}
		mu.Unlock()
	}
	for w := range workers {
		key := workerKeys[w%keys]
		wg.Go(func() {
			for {
				r, err := s.send(client, 30*time.Second, "POST", "/v1/claims", key, map[string]any{"queue": "race"})
				if err != nil {
					fail(err)
					return
				}
				if r.Status == 204 {
					return
				}
				if r.Status != 200 {
					fail(fmt.Errorf("claim: %d %s", r.Status, r.Body))
					return
				}
				var c claimed
				if err := json.Unmarshal(r.Body, &c); err != nil {
					fail(err)
					return
				}
				mu.Lock()
				claims[c.Task.ID]++
				dupRun := runs[c.Lease.RunID]
				runs[c.Lease.RunID] = true
				mu.Unlock()
				if dupRun {
					fail(fmt.Errorf("run %s granted twice", c.Lease.RunID))
				}
				r, err = s.send(client, 30*time.Second, "POST", "/v1/claims/"+c.Task.ID+"/submit", key,
					map[string]any{"lease_token": c.Lease.Token, "outcome": "succeeded"})
				if err != nil {
					fail(err)
					return
				}
				if r.Status != 200 {
					fail(fmt.Errorf("submit %s: %d %s", c.Task.ID, r.Status, r.Body))
					return
				}
			}
		})
	}
	wg.Wait()
	if workErr != nil {
		t.Fatal(workErr)
	}

	for id, n := range claims {
		if n != 1 {
			t.Errorf("task %s claimed %d times", id, n)
		}
		if !want[id] {
			t.Errorf("claimed unknown task %s", id)
		}
	}
	if len(claims) != tasks {
		t.Fatalf("%d distinct tasks claimed, want %d", len(claims), tasks)
	}
	var counts struct {
		Queues map[string]map[string]int `json:"queues"`
	}
	s.must(200, "GET", "/v1/counts", producer, nil).decode(t, &counts)
	if got := counts.Queues["race"]; len(got) != 1 || got[tessera.StateSucceeded] != tasks {
		t.Fatalf("counts after the race: %v", got)
	}
	// Each task has exactly one run, ended in success.
	for id := range want {
		got := s.task("main", producer, id)
		if got.State != tessera.StateSucceeded || got.Attempts != 1 || len(got.Runs) != 1 || got.Runs[0].Outcome != tessera.OutcomeSucceeded {
			t.Fatalf("task %s: state %s attempts %d runs %+v", id, got.State, got.Attempts, got.Runs)
		}
	}
}

// A dashboard polling GET /v1/counts on a large namespace does not hold
// up the writer: enqueues run at least a quarter as fast with four pollers
// as without (they took a full scan inside the write transaction and cut
// enqueues a hundredfold). A ratio within one test, never a time.
func TestCountsPollersDoNotStallEnqueues(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a namespace with 20,000 tasks")
	}
	s := newTestServer(t)
	key, _ := s.newKey("service", "namespace:*", "read", "enqueue")
	ctx := t.Context()
	now := s.Clock.Now()
	if err := s.DB.Update(ctx, func(tx store.Tx) error {
		for i := range 20000 {
			state := tessera.StateSucceeded
			if i%10 == 0 {
				state = tessera.StateReady
			}
			task := &tessera.Task{Namespace: "big", ID: fmt.Sprintf("01BIG%07d", i), Queue: fmt.Sprint("q", i%4), Title: "t",
				Labels: []string{}, MaxAttempts: 3, State: state, RunAt: now, CreatedBy: "p", CreatedAt: now, UpdatedAt: now}
			if err := tx.TaskInsert(ctx, task); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	enqueues := func(n int) time.Duration {
		start := time.Now()
		for range n {
			s.enqueue("big", key, map[string]any{"queue": "q0"})
		}
		return time.Since(start)
	}
	enqueues(20) // warm
	alone := enqueues(200)
	stop := make(chan struct{})
	var polls atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				s.must(200, "GET", "/ns/big/v1/counts", key, nil)
				polls.Add(1)
			}
		})
	}
	polled := enqueues(200)
	close(stop)
	wg.Wait()
	ratio := alone.Seconds() / polled.Seconds()
	t.Logf("200 enqueues: %s alone, %s beside %d counts polls; rate ratio %.2f", alone, polled, polls.Load(), ratio)
	if polls.Load() < 20 {
		t.Fatalf("only %d polls ran beside the enqueues", polls.Load())
	}
	if ratio < 0.25 {
		t.Errorf("enqueues beside counts pollers ran at %.2f of their rate alone, want ≥ 0.25", ratio)
	}
}
