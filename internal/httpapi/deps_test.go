package httpapi_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/tessera"
)

// batchGraph enqueues tasks (each a map of body fields) in one batch and
// returns them by title.
func (s *testServer) batchGraph(ns string, tasks ...map[string]any) map[string]tessera.Task {
	s.t.Helper()
	var out struct{ Tasks []tessera.Task }
	s.must(201, "POST", nsPath(ns, "/v1/tasks/batch"), adminKey, map[string]any{"tasks": tasks}).decode(s.t, &out)
	byTitle := map[string]tessera.Task{}
	for _, t := range out.Tasks {
		byTitle[t.Title] = t
	}
	return byTitle
}

// states reads each task's state and its count of unfinished parents.
func (s *testServer) states(ns string, tasks map[string]tessera.Task) map[string]string {
	s.t.Helper()
	out := map[string]string{}
	for title, t := range tasks {
		got := s.task(ns, adminKey, t.ID)
		state := got.State
		if d := got.Dependency; d != nil && got.State == tessera.StateWaiting {
			state += fmt.Sprint(d.WaitingOn)
		}
		out[title] = state
	}
	return out
}

func wantStates(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s is %s, want %s (all: %v)", what, k, got[k], v, got)
		}
	}
}

// A diamond — B and C after A, D after both — runs in order: only what
// has every parent succeeded is ever claimable, and D waits on B and C
// together.
func TestDiamondRunsInOrder(t *testing.T) {
	s := newTestServer(t)
	g := s.batchGraph("main",
		map[string]any{"title": "A", "queue": "d", "ref": "a"},
		map[string]any{"title": "B", "queue": "d", "ref": "b", "after": []string{"a"}},
		map[string]any{"title": "C", "queue": "d", "ref": "c", "after": []string{"a"}},
		map[string]any{"title": "D", "queue": "d", "after": []string{"b", "c"}},
	)
	if d := g["D"].Dependency; d == nil || d.WaitingOn != 2 || d.After[0] != g["B"].ID || d.After[1] != g["C"].ID {
		t.Fatalf("D as enqueued: %+v", g["D"])
	}
	wantStates(t, "enqueued", s.states("main", g), map[string]string{"A": "ready", "B": "waiting1", "C": "waiting1", "D": "waiting2"})
	run := func(want string) {
		t.Helper()
		c := s.claim("main", adminKey, "d")
		if c.Task.Title != want {
			t.Fatalf("claimed %s, want %s", c.Task.Title, want)
		}
		s.submit("main", adminKey, c, "succeeded")
	}
	run("A")
	wantStates(t, "after A", s.states("main", g), map[string]string{"B": "ready", "C": "ready", "D": "waiting2"})
	run("B")
	wantStates(t, "after B", s.states("main", g), map[string]string{"C": "ready", "D": "waiting1"})
	s.emptyClaimNot(t, "d", "C") // D is not claimable while C runs
	run("D")
	wantStates(t, "done", s.states("main", g), map[string]string{"A": "succeeded", "B": "succeeded", "C": "succeeded", "D": "succeeded"})
	var deps struct{ Tasks []tessera.Task }
	s.must(200, "GET", "/v1/tasks/"+g["A"].ID+"/dependents", adminKey, nil).decode(t, &deps)
	if len(deps.Tasks) != 2 {
		t.Fatalf("A's dependents: %+v", deps.Tasks)
	}
}

// emptyClaimNot claims the one task left claimable in queue, titled want,
// leaving it leased: nothing else may be claimable.
func (s *testServer) emptyClaimNot(t *testing.T, queue, want string) {
	t.Helper()
	c := s.claim("main", adminKey, queue)
	if c.Task.Title != want {
		t.Fatalf("claimed %s, want %s", c.Task.Title, want)
	}
	s.emptyClaim("main", adminKey, queue)
	s.submit("main", adminKey, c, "succeeded")
}

// A stale holder's late submit settles nothing downstream: the lease that
// lapsed and was granted again is the only one whose submit counts.
func TestAStaleSubmitUnblocksNoDependent(t *testing.T) {
	s := newTestServer(t)
	g := s.batchGraph("main",
		map[string]any{"title": "B", "queue": "s", "ref": "b", "max_attempts": 3},
		map[string]any{"title": "D", "queue": "s", "after": []string{"b"}},
	)
	first := s.claim("main", adminKey, "s")
	s.lapse(first, "s")
	second := s.claim("main", adminKey, "s")
	if second.Task.ID != g["B"].ID {
		t.Fatalf("re-granted %s", second.Task.Title)
	}
	r := s.do("POST", "/v1/claims/"+g["B"].ID+"/submit", adminKey, map[string]any{"lease_token": first.Lease.Token, "outcome": "succeeded"})
	wantError(t, r, 409, "lease_lost", "")
	wantStates(t, "after the stale submit", s.states("main", g), map[string]string{"B": "leased", "D": "waiting1"})
	s.submit("main", adminKey, second, "succeeded")
	wantStates(t, "after the live submit", s.states("main", g), map[string]string{"B": "succeeded", "D": "ready"})
}

// lapse lets c's lease run out, has a claim on queue notice it, and waits
// out the backoff: the task is claimable again.
func (s *testServer) lapse(c claimed, queue string) {
	s.t.Helper()
	s.Clock.Advance(time.Duration(c.Lease.Seconds+1) * time.Second)
	s.emptyClaim("main", adminKey, queue)
	s.Clock.Advance(time.Minute)
}

// A parent that ends dead cancels its dependents, and theirs in turn,
// each naming the parent that canceled it — unless on_parent_failure is
// "run": then it counts as finished and its child runs, knowing which
// parent failed. Retried with dependents, the parent takes them back.
func TestAFailedParentCancelsOrRunsItsDependents(t *testing.T) {
	s := newTestServer(t)
	g := s.batchGraph("main",
		map[string]any{"title": "A", "queue": "f", "ref": "a", "max_attempts": 1},
		map[string]any{"title": "B", "queue": "f", "ref": "b", "after": []string{"a"}},
		map[string]any{"title": "C", "queue": "f", "after": []string{"b"}},
		map[string]any{"title": "X", "queue": "f", "after": []string{"a"}, "on_parent_failure": "run"},
	)
	s.submit("main", adminKey, s.claim("main", adminKey, "f"), "failed")
	wantStates(t, "after A died", s.states("main", g), map[string]string{"A": "dead", "B": "canceled", "C": "canceled", "X": "ready"})
	b, c, x := s.task("main", adminKey, g["B"].ID), s.task("main", adminKey, g["C"].ID), s.task("main", adminKey, g["X"].ID)
	if !strings.Contains(b.Error, g["A"].ID) || b.Dependency.CanceledBy != g["A"].ID || !strings.Contains(c.Error, g["B"].ID) {
		t.Fatalf("cancels name their parents: B %q %+v, C %q", b.Error, b.Dependency, c.Error)
	}
	if x.Dependency.FailedParent != g["A"].ID {
		t.Fatalf("X does not know which parent failed: %+v", x.Dependency)
	}

	var retried tessera.Task
	s.must(200, "POST", "/v1/tasks/"+g["A"].ID+"/retry", adminKey, map[string]any{"dependents": true}).decode(t, &retried)
	wantStates(t, "after A's retry with dependents", s.states("main", g), map[string]string{"A": "ready", "B": "waiting1", "C": "waiting1", "X": "ready"})
	s.submit("main", adminKey, s.claimOf(t, "f", g["A"].ID), "succeeded")
	wantStates(t, "after A succeeded", s.states("main", g), map[string]string{"B": "ready", "C": "waiting1"})
}

// claimOf claims from queue until it gets the task id, submitting what it
// gets before it.
func (s *testServer) claimOf(t *testing.T, queue, id string) claimed {
	t.Helper()
	for range 10 {
		c := s.claim("main", adminKey, queue)
		if c.Task.ID == id {
			return c
		}
		s.submit("main", adminKey, c, "succeeded")
	}
	t.Fatalf("never claimed %s", id)
	return claimed{}
}

// A batch that builds a graph is all or nothing: a parent named by no
// task and no earlier ref, a ref to a later task, or a ref given twice
// refuses the whole batch, naming the task, and enqueues nothing.
func TestABatchGraphIsAllOrNothing(t *testing.T) {
	s := newTestServer(t)
	for _, c := range []struct {
		name  string
		tasks []map[string]any
		field string
	}{
		{"a parent that is nothing", []map[string]any{{"title": "A", "ref": "a"}, {"title": "B", "after": []string{"nope"}}}, "tasks[1].after"},
		{"a ref to a later task", []map[string]any{{"title": "A", "after": []string{"b"}}, {"title": "B", "ref": "b"}}, "tasks[0].after"},
		{"a ref given twice", []map[string]any{{"title": "A", "ref": "a"}, {"title": "B", "ref": "a"}}, "tasks[1].ref"},
		{"too many parents", []map[string]any{{"title": "A", "after": strings.Split(strings.Repeat("x,", 100)+"x", ",")}}, "tasks[0].after"},
	} {
		wantError(t, s.do("POST", "/v1/tasks/batch", adminKey, map[string]any{"tasks": c.tasks}), 400, "invalid_request", c.field)
	}
	wantError(t, s.do("POST", "/v1/tasks", adminKey, map[string]any{"title": "alone", "ref": "r"}), 400, "invalid_request", "ref")
	if ids := s.listIDs("main", adminKey, ""); len(ids) != 0 {
		t.Fatalf("refused batches enqueued %d tasks", len(ids))
	}
	// A parent that already finished counts at once.
	done := s.enqueue("main", adminKey, map[string]any{"title": "done", "queue": "g"})
	s.submit("main", adminKey, s.claim("main", adminKey, "g"), "succeeded")
	child := s.enqueue("main", adminKey, map[string]any{"title": "child", "after": []string{done.ID}})
	if child.State != "ready" || child.Dependency.WaitingOn != 0 {
		t.Fatalf("a task after a finished parent: %s %+v", child.State, child.Dependency)
	}
}

// A parent with more children than one transaction settles hands the rest
// to the dependency worker: every child becomes ready, none twice.
func TestManyChildrenAreSettledInBatches(t *testing.T) {
	s := newTestServer(t)
	parent := s.enqueue("main", adminKey, map[string]any{"title": "parent", "queue": "p"})
	const n = 450
	for i := 0; i < n; i += 150 {
		var batch []map[string]any
		for j := i; j < i+150; j++ {
			batch = append(batch, map[string]any{"title": fmt.Sprint("child ", j), "queue": "kids", "after": []string{parent.ID}})
		}
		s.must(201, "POST", "/v1/tasks/batch", adminKey, map[string]any{"tasks": batch})
	}
	s.submit("main", adminKey, s.claim("main", adminKey, "p"), "succeeded")
	ready := func() int {
		var counts struct{ Queues map[string]map[string]int }
		s.must(200, "GET", "/v1/counts", adminKey, nil).decode(t, &counts)
		return counts.Queues["kids"]["ready"]
	}
	for deadline := time.Now().Add(30 * time.Second); ready() < n && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
	}
	var counts struct{ Queues map[string]map[string]int }
	s.must(200, "GET", "/v1/counts", adminKey, nil).decode(t, &counts)
	if k := counts.Queues["kids"]; k["ready"] != n || k["waiting"] != 0 {
		t.Fatalf("children after their parent succeeded: %v", k)
	}
}

// A heartbeat's checkpoint is kept for the next attempt: its claim
// returns it, GET of the task shows it, and a stale token's is refused.
func TestCheckpointsReachTheNextAttempt(t *testing.T) {
	s := newTestServer(t)
	task := s.enqueue("main", adminKey, map[string]any{"title": "long", "queue": "cp"})
	first := s.claim("main", adminKey, "cp")
	if r := s.must(200, "POST", "/v1/claims/"+task.ID+"/heartbeat", adminKey, map[string]any{"lease_token": first.Lease.Token, "checkpoint": map[string]any{"done": 3}}); r == nil {
		t.Fatal("heartbeat")
	}
	s.lapse(first, "cp")
	var second struct {
		Task               tessera.Task       `json:"task"`
		Lease              tessera.Lease      `json:"lease"`
		PreviousCheckpoint tessera.Checkpoint `json:"previous_checkpoint"`
	}
	s.must(200, "POST", "/v1/claims", adminKey, map[string]any{"queue": "cp"}).decode(t, &second)
	if string(second.PreviousCheckpoint.Value) != `{"done":3}` || second.PreviousCheckpoint.Attempt != 1 || second.PreviousCheckpoint.RunID != first.Lease.RunID {
		t.Fatalf("the second attempt's claim: %+v", second.PreviousCheckpoint)
	}
	wantError(t, s.do("POST", "/v1/claims/"+task.ID+"/heartbeat", adminKey, map[string]any{"lease_token": first.Lease.Token, "checkpoint": "stale"}), 409, "lease_lost", "")
	got := s.task("main", adminKey, task.ID)
	raw, _ := json.Marshal(got.Checkpoint.Value)
	if got.Checkpoint == nil || string(got.Checkpoint.Value) != `{"done":3}` {
		t.Fatalf("the task's checkpoint after a stale one: %s", raw)
	}
	wantError(t, s.do("POST", "/v1/claims/"+task.ID+"/heartbeat", adminKey, map[string]any{"lease_token": second.Lease.Token, "checkpoint": strings.Repeat("x", 70<<10)}), 400, "invalid_request", "checkpoint")
}

// A ref spelled like a task id is refused: a later task's after naming it
// could not tell the batch's task from the existing task of that id.
func TestBatchRefLikeATaskIDIsRefused(t *testing.T) {
	s := newTestServer(t)
	existing := s.enqueue("main", adminKey, map[string]any{"queue": "r"})
	r := s.do("POST", "/v1/tasks/batch", adminKey, map[string]any{"tasks": []map[string]any{
		{"title": "A", "queue": "r", "ref": existing.ID},
		{"title": "B", "queue": "r", "after": []string{existing.ID}},
	}})
	wantError(t, r, 400, "invalid_request", "tasks[0].ref")
}
