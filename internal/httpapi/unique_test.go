package httpapi_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// A unique key (issue 40): the first enqueue is 201, a repeat while the
// task is unfinished 200 with that task and deduplicated: true — with an
// Idempotency-Key too, whose replay answers as the first answer did; a
// batch whose every task was there already is 200; a key over 200 bytes is
// refused naming the field.
func TestUniqueKeyOverHTTP(t *testing.T) {
	s := newTestServer(t)
	producer, _ := s.newKey("service", "namespace:*", "enqueue", "read")
	body := map[string]any{"title": "sync", "queue": "q", "unique_key": "acct-7"}
	var first, again tessera.Task
	s.must(201, "POST", "/v1/tasks", producer, body).decode(t, &first)
	r := s.must(200, "POST", "/v1/tasks", producer, body, "Idempotency-Key", "k1")
	r.decode(t, &again)
	if again.ID != first.ID || !again.Deduplicated || again.UniqueKey != "acct-7" || first.Deduplicated {
		t.Fatalf("first %s (deduplicated %v), again %s (deduplicated %v, key %q); want the same task, the second deduplicated",
			first.ID, first.Deduplicated, again.ID, again.Deduplicated, again.UniqueKey)
	}
	if !strings.Contains(string(r.Body), `"deduplicated":true`) {
		t.Errorf("the answer does not say deduplicated: %s", r.Body)
	}
	replay := s.must(200, "POST", "/v1/tasks", producer, body, "Idempotency-Key", "k1")
	if string(replay.Body) != string(r.Body) {
		t.Errorf("the replay answered %s, the first answer %s", replay.Body, r.Body)
	}

	var batch core.TaskBatch
	s.must(200, "POST", "/v1/tasks/batch", producer, map[string]any{"tasks": []any{body, body}}).decode(t, &batch)
	if len(batch.Tasks) != 2 || batch.Tasks[0].ID != first.ID || batch.Tasks[1].ID != first.ID {
		t.Errorf("a batch of the held key twice answered %+v; want the held task twice", batch.Tasks)
	}
	s.must(201, "POST", "/v1/tasks/batch", producer, map[string]any{"tasks": []any{body, map[string]any{"title": "new", "queue": "q"}}})

	long := map[string]any{"title": "sync", "unique_key": strings.Repeat("k", 201)}
	bad := s.do("POST", "/v1/tasks", producer, long)
	if bad.Status != 400 || !strings.Contains(string(bad.Body), "unique_key") {
		t.Errorf("a 201-byte key: %d %s; want 400 naming unique_key", bad.Status, bad.Body)
	}
}

// A debounce key (issue 40): the first enqueue is 201 and scheduled
// seconds ahead; the next, while the task is unclaimed, 200 with that task
// moved on and debounced: true.
func TestDebounceOverHTTP(t *testing.T) {
	s := newTestServer(t)
	producer, _ := s.newKey("service", "namespace:*", "enqueue", "read")
	body := func(title string) map[string]any {
		return map[string]any{"title": title, "queue": "q", "debounce": map[string]any{"key": "doc-9", "seconds": 30}}
	}
	var first, again tessera.Task
	s.must(201, "POST", "/v1/tasks", producer, body("v1")).decode(t, &first)
	s.Clock.Advance(10 * time.Second)
	r := s.must(200, "POST", "/v1/tasks", producer, body("v2"))
	r.decode(t, &again)
	if again.ID != first.ID || !again.Debounced || again.Title != "v2" || !again.RunAt.Equal(first.RunAt.Add(10*time.Second)) ||
		again.State != tessera.StateScheduled || again.DebounceKey != "doc-9" {
		t.Fatalf("first %+v\nagain %+v\nwant the same task, titled v2, 10 s later, debounced", first, again)
	}
	if !strings.Contains(string(r.Body), `"debounced":true`) {
		t.Errorf("the answer does not say debounced: %s", r.Body)
	}
	for _, bad := range []map[string]any{
		{"title": "x", "debounce": map[string]any{"key": "k"}},                                  // no seconds
		{"title": "x", "debounce": map[string]any{"key": "k", "seconds": 86401}},                // over a day
		{"title": "x", "unique_key": "u", "debounce": map[string]any{"key": "k", "seconds": 1}}, // both
	} {
		if r := s.do("POST", "/v1/tasks", producer, bad); r.Status != 400 || !strings.Contains(string(r.Body), "debounce") {
			t.Errorf("%v: %d %s; want 400 naming debounce", bad, r.Status, r.Body)
		}
	}
}
