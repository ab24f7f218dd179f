package httpapi_test

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// A lease token is a fencing token: it passes only exactly as the claim
// issued it. A token with anything before its secret — a prefix, or
// another task's id — is lease_lost on every route that takes one, and
// changes nothing: the lease is not extended, the task not ended or
// released, no record or upload is written under it.
func TestLeaseTokenMustMatchExactly(t *testing.T) {
	s := newTestServer(t)
	producer, _ := s.newKey("service", "namespace:main", "enqueue", "read")
	worker, _ := s.newKey("agent", "namespace:main", "claim", "write", "read")
	task := s.enqueue("main", producer, map[string]any{"title": "held"})
	other := s.enqueue("main", producer, map[string]any{"title": "also held"})
	c := s.claim("main", worker, "default")
	if c.Task.ID != task.ID {
		t.Fatalf("claimed %s, want %s", c.Task.ID, task.ID)
	}
	s.claim("main", worker, "default") // other is leased too: its id names a live lease
	_, secret, _ := strings.Cut(c.Lease.Token, ".")
	// Later, so a heartbeat that passed would move the lease's expiry.
	s.Clock.Advance(time.Minute)
	before := s.must(200, "GET", "/v1/tasks/"+task.ID, producer, nil).Body

	for _, tok := range []struct{ name, token string }{
		{"another task's id before the secret", other.ID + "." + secret},
		{"prefixed", "wrong" + c.Lease.Token},
	} {
		token := tok.token
		routes := []struct {
			method, path string
			body         map[string]any
		}{
			{"POST", "/v1/claims/" + task.ID + "/heartbeat", map[string]any{"lease_token": token, "lease_seconds": 600}},
			{"POST", "/v1/claims/" + task.ID + "/submit", map[string]any{"lease_token": token, "outcome": "succeeded"}},
			{"POST", "/v1/claims/" + task.ID + "/release", map[string]any{"lease_token": token}},
			{"PUT", "/v1/records/results/" + task.ID, map[string]any{"value": 1, "lease_token": token}},
			{"POST", "/v1/blobs", map[string]any{"sha256": sum([]byte("x")), "size": 1, "lease_token": token}},
		}
		for _, r := range routes {
			t.Run(tok.name+" "+r.method+" "+r.path, func(t *testing.T) {
				wantError(t, s.do(r.method, r.path, worker, r.body), 409, "lease_lost", "")
			})
		}
	}
	if after := s.must(200, "GET", "/v1/tasks/"+task.ID, producer, nil).Body; !bytes.Equal(after, before) {
		t.Errorf("the task changed under refused tokens:\nbefore %s\nafter  %s", before, after)
	}
	wantError(t, s.do("GET", "/v1/records/results/"+task.ID, worker, nil), 404, "not_found", "")
	// The lease was live all along: the token as issued still holds it.
	s.must(200, "POST", "/v1/claims/"+task.ID+"/heartbeat", worker, map[string]any{"lease_token": c.Lease.Token})
}
