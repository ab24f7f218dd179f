package httpapi_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/ops"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// A paused queue grants nothing — claims answer empty and say why — while
// other queues and leases held already go on; resuming wakes the claims
// that wait on it.
func TestAPausedQueueGrantsNothing(t *testing.T) {
	s := newTestServer(t)
	held := s.enqueue("main", adminKey, map[string]any{"title": "held", "queue": "mail"})
	c := s.claim("main", adminKey, "mail")
	waiting := s.enqueue("main", adminKey, map[string]any{"title": "waiting", "queue": "mail"})
	s.enqueue("main", adminKey, map[string]any{"title": "elsewhere", "queue": "build"})

	var q core.QueueState
	s.must(200, "POST", "/v1/queues/mail/pause", adminKey, nil).decode(t, &q)
	if !q.Paused || q.PausedAt == nil || q.Queue != "mail" {
		t.Fatalf("paused: %+v", q)
	}
	r := s.must(204, "POST", "/v1/claims", adminKey, map[string]any{"queue": "mail"})
	if r.Header.Get(ops.QueuePausedHeader) != "true" || r.Header.Get(ops.QueueKnownHeader) != "true" {
		t.Fatalf("an empty claim of a paused queue: %v", r.Header)
	}
	s.claim("main", adminKey, "build")
	s.must(200, "POST", "/v1/claims/"+held.ID+"/heartbeat", adminKey, map[string]any{"lease_token": c.Lease.Token})
	s.must(200, "POST", "/v1/queues/mail/pause", adminKey, nil) // again: still paused

	var queues core.QueuesPage
	s.must(200, "GET", "/v1/queues", adminKey, nil).decode(t, &queues)
	if len(queues.Queues) != 2 || queues.Queues[1].Queue != "mail" || !queues.Queues[1].Paused || queues.Queues[0].Paused {
		t.Fatalf("queues: %+v", queues.Queues)
	}

	long := s.async(streamWait, "POST", "/v1/claims", adminKey, map[string]any{"queue": "mail", "wait_seconds": 5})
	parked()
	s.must(200, "POST", "/v1/queues/mail/resume", adminKey, nil).decode(t, &q)
	if q.Paused {
		t.Fatalf("resumed: %+v", q)
	}
	var got claimed
	if r := await(t, long); r.Status != 200 {
		t.Fatalf("the waiting claim after the resume: %d %s", r.Status, r.Body)
	} else {
		r.decode(t, &got)
	}
	if got.Task.ID != waiting.ID {
		t.Fatalf("the waiting claim got %s, want %s", got.Task.ID, waiting.ID)
	}
}

// Bulk changes are bounded at 1,000 a call, count first, and change only
// what was counted.
func TestBulkChangesWhatWasCounted(t *testing.T) {
	s := newTestServer(t)
	enqueueEvents(s, core.MaxBulk+1) // queue "bench", titles "event N"
	other := s.enqueue("main", adminKey, map[string]any{"title": "unrelated", "queue": "bench"})
	bulk := func(status int, body map[string]any) core.Bulk {
		t.Helper()
		var out core.Bulk
		s.must(status, "POST", "/v1/tasks/bulk", adminKey, body).decode(t, &out)
		return out
	}
	sel := map[string]any{"action": "cancel", "queue": "bench", "title": "EVENT"}
	with := func(extra map[string]any) map[string]any {
		m := map[string]any{}
		for k, v := range sel {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	if n := bulk(200, with(map[string]any{"dry_run": true})); n.Count != core.MaxBulk || !n.More || len(n.Changed) != 0 {
		t.Fatalf("a dry run over the bound: %+v", n)
	}
	wantError(t, s.do("POST", "/v1/tasks/bulk", adminKey, sel), 400, "invalid_request", "expect")
	wantError(t, s.do("POST", "/v1/tasks/bulk", adminKey, with(map[string]any{"expect": 999})), 409, "version_conflict", "")
	done := bulk(200, with(map[string]any{"expect": core.MaxBulk}))
	if done.Count != core.MaxBulk || !done.More || len(done.Changed) != core.MaxBulk {
		t.Fatalf("a change of 1,000: count %d more %v changed %d", done.Count, done.More, len(done.Changed))
	}
	rest := bulk(200, with(map[string]any{"dry_run": true}))
	if rest.Count != 1 || rest.More {
		t.Fatalf("the rest: %+v", rest)
	}
	last := bulk(200, with(map[string]any{"expect": 1}))
	if len(last.Changed) != 1 || last.More {
		t.Fatalf("the last: %+v", last)
	}
	if got := s.task("main", adminKey, other.ID); got.State != tessera.StateReady {
		t.Fatalf("a task the filter did not select is %s", got.State)
	}
	// Retry: canceled tasks are what it applies to now.
	retry := bulk(200, map[string]any{"action": "retry", "queue": "bench", "dry_run": true})
	if retry.Count != core.MaxBulk || !retry.More {
		t.Fatalf("a retry's dry run: %+v", retry)
	}
	var counts struct {
		Queues map[string]map[string]int `json:"queues"`
	}
	s.must(200, "GET", "/v1/counts", adminKey, nil).decode(t, &counts)
	if c := counts.Queues["bench"]; c["canceled"] != core.MaxBulk+1 || c["ready"] != 1 {
		t.Fatalf("counts after the bulk cancels: %v", c)
	}

	// A purge deletes a queue's finished tasks, 1,000 a call.
	var p core.QueuePurged
	s.must(200, "POST", "/v1/queues/bench/purge", adminKey, map[string]any{"states": []string{"canceled"}}).decode(t, &p)
	if p.Purged != core.MaxPurge || !p.More {
		t.Fatalf("purge: %+v", p)
	}
	s.must(200, "POST", "/v1/queues/bench/purge", adminKey, nil).decode(t, &p)
	if p.Purged != 1 || p.More {
		t.Fatalf("purge again: %+v", p)
	}
	s.must(200, "GET", "/v1/counts", adminKey, nil).decode(t, &counts)
	if c := counts.Queues["bench"]; c["canceled"] != 0 || c["ready"] != 1 {
		t.Fatalf("counts after the purges: %v", c)
	}
}

// A task's trail: its events of the window, the records and blobs its
// runs wrote, and its notes.
func TestTaskTrail(t *testing.T) {
	s := newTestServer(t)
	task := s.enqueue("main", adminKey, map[string]any{"title": "trail", "queue": "t"})
	c := s.claim("main", adminKey, "t")
	s.must(201, "POST", "/v1/tasks/"+task.ID+"/notes", adminKey, map[string]any{"body": "mind the gap"})
	s.must(201, "PUT", "/v1/records/out/r1", adminKey, map[string]any{"value": 1, "lease_token": c.Lease.Token})
	s.must(201, "PUT", "/v1/records/out/unbound", adminKey, map[string]any{"value": 2})
	blob := s.uploadBlob("main", adminKey, []byte("the run's output"), map[string]any{"lease_token": c.Lease.Token})
	s.submit("main", adminKey, c, tessera.OutcomeSucceeded)
	s.task("main", adminKey, task.ID) // a read: no part of the trail

	var trail core.Trail
	s.must(200, "GET", "/v1/tasks/"+task.ID+"/trail", adminKey, nil).decode(t, &trail)
	var kinds []string
	for _, e := range trail.Events {
		kinds = append(kinds, e.Kind+" "+e.Target)
	}
	want := []string{"task.enqueued " + task.ID, "task.claimed " + task.ID, "record.written out/r1", "blob.stored " + blob.Ref, "task.succeeded " + task.ID}
	if strings.Join(kinds, ",") != strings.Join(want, ",") {
		t.Fatalf("trail %q, want %q", kinds, want)
	}
	if len(trail.Notes) != 1 || trail.Notes[0].Body != "mind the gap" || !trail.Since.Equal(task.CreatedAt) {
		t.Fatalf("notes %+v since %v", trail.Notes, trail.Since)
	}
	wantError(t, s.do("GET", "/v1/tasks/01ARZ3NDEKTSV4RRFFQ69G5FAV/trail", adminKey, nil), 404, "not_found", "")
}

// A queue's throughput counts the runs that ended each minute, by how.
func TestQueueThroughput(t *testing.T) {
	s := newTestServer(t)
	for _, outcome := range []string{"succeeded", "succeeded", "failed"} {
		s.enqueue("main", adminKey, map[string]any{"title": "w", "queue": "w"})
		s.submit("main", adminKey, s.claim("main", adminKey, "w"), outcome)
	}
	var page core.QueuesPage
	s.must(200, "GET", "/v1/queues", adminKey, nil).decode(t, &page)
	q := page.Queues[0]
	now := q.Throughput[len(q.Throughput)-1]
	if len(q.Throughput) != core.ThroughputMinutes || now.Succeeded != 2 || now.Failed != 1 || now.Dead != 0 ||
		!now.Minute.Equal(s.Clock.Now().Truncate(time.Minute)) {
		t.Fatalf("throughput %+v", q.Throughput)
	}
	if q.Counts["succeeded"] != 2 || q.Counts["scheduled"] != 1 || q.Counts["ready"] != 0 {
		t.Fatalf("counts %v", q.Counts)
	}
}

// The task list finds tasks by text in the title and by when they were
// made.
func TestTaskListSearches(t *testing.T) {
	s := newTestServer(t)
	a := s.enqueue("main", adminKey, map[string]any{"title": "Resize PHOTOS"})
	s.Clock.Advance(time.Minute)
	b := s.enqueue("main", adminKey, map[string]any{"title": "resize videos"})
	c := s.enqueue("main", adminKey, map[string]any{"title": "photos again", "queue": "other"})
	list := func(q url.Values) string {
		return strings.Join(s.listIDs("main", adminKey, "?"+q.Encode()), ",")
	}
	cases := []struct {
		q    url.Values
		want []string
	}{
		{url.Values{"title": {"photos"}}, []string{c.ID, a.ID}},
		{url.Values{"title": {"RESIZE"}}, []string{b.ID, a.ID}},
		{url.Values{"title": {"photos"}, "queue": {"default"}}, []string{a.ID}},
		{url.Values{"created_after": {b.CreatedAt.Format(time.RFC3339Nano)}}, []string{c.ID, b.ID}},
		{url.Values{"created_before": {b.CreatedAt.Format(time.RFC3339Nano)}}, []string{a.ID}},
		{url.Values{"title": {"resize"}, "limit": {"1"}}, []string{b.ID}},
	}
	for _, cs := range cases {
		if got := list(cs.q); got != strings.Join(cs.want, ",") {
			t.Errorf("%v: %s, want %s", cs.q, got, strings.Join(cs.want, ","))
		}
	}
}

// The console's operations are tools too: the same bad input gets the
// same answer over both transports, and a read-only key is refused
// actions alike.
func TestConsoleOperationsParity(t *testing.T) {
	s := newTestServer(t)
	reader, _ := s.newKey("agent", "namespace:main", "read")
	task := s.enqueue("main", adminKey, map[string]any{"title": "parity"})
	s.checkParity(t, []parity{
		{"a bad queue", adminKey, "pause_queue", map[string]any{"queue": "a/b"}, invalid("queue")},
		{"a bad action", adminKey, "bulk_change_tasks", map[string]any{"action": "delete", "dry_run": true}, invalid("action")},
		{"an expect past the bound", adminKey, "bulk_change_tasks", map[string]any{"action": "retry", "expect": core.MaxBulk + 1}, invalid("expect")},
		{"no expect", adminKey, "bulk_change_tasks", map[string]any{"action": "retry"}, invalid("expect")},
		{"a state not finished", adminKey, "purge_queue", map[string]any{"queue": "q", "states": []string{"ready"}}, invalid("states")},
		{"a title on two lines", adminKey, "bulk_change_tasks", map[string]any{"action": "retry", "dry_run": true, "title": "a\nb"}, invalid("title")},
		{"a trail of nothing", adminKey, "task_trail", map[string]any{"task_id": "01ARZ3NDEKTSV4RRFFQ69G5FAV"}, outcome{Status: 404, Code: "not_found"}},
		{"a reader pauses", reader, "pause_queue", map[string]any{"queue": "q"}, outcome{Status: 403, Code: "forbidden"}},
		{"a reader purges", reader, "purge_queue", map[string]any{"queue": "q"}, outcome{Status: 403, Code: "forbidden"}},
		{"a reader changes in bulk", reader, "bulk_change_tasks", map[string]any{"action": "retry", "dry_run": true}, outcome{Status: 403, Code: "forbidden"}},
		{"a reader lists queues", reader, "list_queues", map[string]any{}, outcome{Status: 200}},
		{"a reader reads a trail", reader, "task_trail", map[string]any{"task_id": task.ID}, outcome{Status: 200}},
	})
}
