package httpapi_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/tessera"
)

// Idempotency-Key (SPEC §5): a repeat with the same body returns the first
// response, status and body, without acting again.

func TestIdempotentEnqueue(t *testing.T) {
	s := newTestServer(t)
	producer, _ := s.newKey("service", "namespace:main", "enqueue", "read")
	other, _ := s.newKey("service", "namespace:main", "enqueue", "read")
	body := map[string]any{"title": "once", "payload": map[string]any{"n": 1}, "labels": []string{"a"}}

	first := s.must(201, "POST", "/v1/tasks", producer, body, "Idempotency-Key", "enq-1")
	// Same request, spelled differently (key order, whitespace): the
	// decoded body is what is compared.
	spelled := `{ "labels": ["a"], "payload": {"n": 1},  "title": "once" }`
	for i, b := range []any{body, spelled} {
		again := s.do("POST", "/v1/tasks", producer, b, "Idempotency-Key", "enq-1")
		if again.Status != first.Status || !bytes.Equal(again.Body, first.Body) {
			t.Fatalf("repeat %d: %d %s, want %d %s", i, again.Status, again.Body, first.Status, first.Body)
		}
	}
	if ids := s.listIDs("main", producer, ""); len(ids) != 1 {
		t.Fatalf("repeats created tasks: %v", ids)
	}

	// Same key, different body.
	body2 := map[string]any{"title": "twice"}
	wantError(t, s.do("POST", "/v1/tasks", producer, body2, "Idempotency-Key", "enq-1"), 409, "idempotency_conflict", "")

	// The key belongs to the principal: another principal's same key is a
	// new request.
	var otherTask tessera.Task
	s.must(201, "POST", "/v1/tasks", other, body, "Idempotency-Key", "enq-1").decode(t, &otherTask)
	var firstTask tessera.Task
	first.decode(t, &firstTask)
	if otherTask.ID == firstTask.ID {
		t.Fatalf("another principal's request was replayed")
	}
	// So does a request without a key.
	s.must(201, "POST", "/v1/tasks", producer, body)
	if ids := s.listIDs("main", producer, ""); len(ids) != 3 {
		t.Fatalf("want 3 tasks, got %v", ids)
	}
}

// The first response is replayed as it was sent, even once the task has
// moved on (here: its run_at came, and it was claimed).
func TestIdempotentEnqueueReplaysFirstResponse(t *testing.T) {
	s := newTestServer(t)
	producer, _ := s.newKey("service", "namespace:main", "enqueue", "read", "claim")
	body := map[string]any{"title": "later", "run_at": s.Clock.Now().Add(time.Minute)}
	first := s.must(201, "POST", "/v1/tasks", producer, body, "Idempotency-Key", "sched-1")
	var task tessera.Task
	first.decode(t, &task)
	if task.State != tessera.StateScheduled {
		t.Fatalf("first response state %s", task.State)
	}
	s.Clock.Advance(2 * time.Minute)
	again := s.must(201, "POST", "/v1/tasks", producer, body, "Idempotency-Key", "sched-1")
	if !bytes.Equal(again.Body, first.Body) {
		t.Fatalf("replay after run_at:\n got %s\nwant %s", again.Body, first.Body)
	}
	s.claim("main", producer, "default")
	again = s.must(201, "POST", "/v1/tasks", producer, body, "Idempotency-Key", "sched-1")
	if !bytes.Equal(again.Body, first.Body) {
		t.Fatalf("replay after claim:\n got %s\nwant %s", again.Body, first.Body)
	}
	if ids := s.listIDs("main", producer, ""); len(ids) != 1 {
		t.Fatalf("replays created tasks: %v", ids)
	}
}

// A submit replayed after it succeeded answers the first response, not
// lease_lost; a different submit with the same key is a conflict.
func TestIdempotentSubmit(t *testing.T) {
	s := newTestServer(t)
	producer, _ := s.newKey("service", "namespace:main", "enqueue", "read")
	worker, _ := s.newKey("agent", "namespace:main", "claim")
	task := s.enqueue("main", producer, map[string]any{})
	c := s.claim("main", worker, "default")
	body := map[string]any{"lease_token": c.Lease.Token, "outcome": "succeeded", "result": map[string]any{"ok": 1}}

	path := "/v1/claims/" + task.ID + "/submit"
	first := s.must(200, "POST", path, worker, body, "Idempotency-Key", "sub-1")
	s.Clock.Advance(time.Minute)
	again := s.do("POST", path, worker, body, "Idempotency-Key", "sub-1")
	if again.Status != 200 || !bytes.Equal(again.Body, first.Body) {
		t.Fatalf("replayed submit: %d %s, want 200 %s", again.Status, again.Body, first.Body)
	}
	// Without the key the lease is simply gone.
	wantError(t, s.do("POST", path, worker, body), 409, "lease_lost", "")
	// Another body under the same key.
	body["outcome"] = "failed"
	wantError(t, s.do("POST", path, worker, body, "Idempotency-Key", "sub-1"), 409, "idempotency_conflict", "")
	got := s.task("main", producer, task.ID)
	if got.State != tessera.StateSucceeded || len(got.Runs) != 1 {
		t.Fatalf("after replays: %s with %d runs", got.State, len(got.Runs))
	}
}

// A failed submit (the task backs off) replays as it was first answered.
func TestIdempotentFailedSubmitReplaysFirstResponse(t *testing.T) {
	s := newTestServer(t)
	producer, _ := s.newKey("service", "namespace:main", "enqueue", "read")
	worker, _ := s.newKey("agent", "namespace:main", "claim")
	task := s.enqueue("main", producer, map[string]any{})
	c := s.claim("main", worker, "default")
	body := map[string]any{"lease_token": c.Lease.Token, "outcome": "failed", "error": "boom"}
	path := "/v1/claims/" + task.ID + "/submit"
	first := s.must(200, "POST", path, worker, body, "Idempotency-Key", "f-1")
	var ft tessera.Task
	first.decode(t, &ft)
	if ft.State != tessera.StateScheduled {
		t.Fatalf("failed submit: %s", ft.State)
	}
	s.Clock.Advance(time.Minute) // past the backoff
	again := s.must(200, "POST", path, worker, body, "Idempotency-Key", "f-1")
	if !bytes.Equal(again.Body, first.Body) {
		t.Fatalf("replay after backoff:\n got %s\nwant %s", again.Body, first.Body)
	}
	if got := s.task("main", producer, task.ID); got.Attempts != 1 || got.State != tessera.StateReady {
		t.Fatalf("replay acted again: state %s attempts %d", got.State, got.Attempts)
	}
}

// A request that failed is not remembered: the same key may be retried.
func TestIdempotentFailureNotRemembered(t *testing.T) {
	s := newTestServer(t)
	producer, _ := s.newKey("service", "namespace:main", "enqueue", "read")
	wantError(t, s.do("POST", "/v1/tasks", producer, map[string]any{"title": ""}, "Idempotency-Key", "k"), 400, "invalid_request", "title")
	s.must(201, "POST", "/v1/tasks", producer, map[string]any{"title": "fixed"}, "Idempotency-Key", "k")
}

func TestIdempotencyKeyBounds(t *testing.T) {
	s := newTestServer(t)
	producer, _ := s.newKey("service", "namespace:main", "enqueue", "read")
	s.must(201, "POST", "/v1/tasks", producer, map[string]any{"title": "x"}, "Idempotency-Key", repeat("k", 128))
	for _, k := range []string{repeat("k", 129), "has space", "tab\there", "ünïcode"} {
		wantError(t, s.do("POST", "/v1/tasks", producer, map[string]any{"title": "x"}, "Idempotency-Key", k), 400, "invalid_request", "Idempotency-Key")
	}
	task := s.enqueue("main", adminKey, map[string]any{"queue": "sub"})
	c := s.claim("main", adminKey, "sub")
	wantError(t, s.do("POST", "/v1/claims/"+task.ID+"/submit", adminKey,
		map[string]any{"lease_token": c.Lease.Token, "outcome": "succeeded"}, "Idempotency-Key", repeat("k", 129)), 400, "invalid_request", "Idempotency-Key")
	if ids := s.listIDs("main", producer, ""); len(ids) != 2 {
		t.Fatalf("refused requests created tasks: %v", ids)
	}
	if got := s.task("main", adminKey, task.ID); got.State != tessera.StateLeased {
		t.Fatalf("refused submit acted: %s", got.State)
	}
}
