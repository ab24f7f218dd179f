package httpapi_test

import (
	"testing"

	"github.com/tessera-dev/tessera/internal/tessera"
)

// The lifecycle of §1: enqueue → claim → heartbeat → submit, as a worker
// and a producer see it over HTTP.
func TestLifecycleEnqueueClaimHeartbeatSubmit(t *testing.T) {
	s := newTestServer(t)
	producer, _ := s.newKey("service", "namespace:main", "enqueue", "read")
	worker, workerID := s.newKey("agent", "namespace:main", "claim")

	task := s.enqueue("main", producer, map[string]any{"title": "summarize", "payload": map[string]any{"doc": 1}})
	if task.State != tessera.StateReady || task.Attempts != 0 {
		t.Fatalf("new task: state %s attempts %d", task.State, task.Attempts)
	}

	c := s.claim("main", worker, "default")
	if c.Task.ID != task.ID || c.Lease.Token == "" || c.Lease.Holder != workerID || c.Task.Attempts != 1 {
		t.Fatalf("claim: %+v", c)
	}

	var hb struct {
		ExpiresAt       string `json:"expires_at"`
		CancelRequested bool   `json:"cancel_requested"`
	}
	s.must(200, "POST", "/v1/claims/"+task.ID+"/heartbeat", worker, map[string]any{"lease_token": c.Lease.Token}).decode(t, &hb)
	if hb.ExpiresAt == "" || hb.CancelRequested {
		t.Fatalf("heartbeat: %+v", hb)
	}

	var done tessera.Task
	s.must(200, "POST", "/v1/claims/"+task.ID+"/submit", worker,
		map[string]any{"lease_token": c.Lease.Token, "outcome": "succeeded", "result": map[string]any{"ok": true}}).decode(t, &done)
	if done.State != tessera.StateSucceeded || string(done.Result) != `{"ok":true}` {
		t.Fatalf("submit: %+v", done)
	}

	var got tessera.Task
	s.must(200, "GET", "/v1/tasks/"+task.ID, producer, nil).decode(t, &got)
	if len(got.Runs) != 1 || got.Runs[0].Outcome != tessera.OutcomeSucceeded || got.Runs[0].EndedAt == nil {
		t.Fatalf("runs: %+v", got.Runs)
	}
}
