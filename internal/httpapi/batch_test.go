package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// Batch enqueue (issue 12): POST /v1/tasks/batch takes 1–500 tasks in one
// transaction, all or none, and answers them in request order.

// batchOf returns a batch body of n tasks titled prefix-0, prefix-1, ….
func batchOf(prefix string, n int) map[string]any {
	tasks := make([]map[string]any, n)
	for i := range tasks {
		tasks[i] = map[string]any{"title": fmt.Sprintf("%s-%d", prefix, i)}
	}
	return map[string]any{"tasks": tasks}
}

// enqueueBatch sends a batch that must succeed and returns its tasks.
func (s *testServer) enqueueBatch(ns, key string, body any, headers ...string) []tessera.Task {
	s.t.Helper()
	var out core.TaskBatch
	s.must(201, "POST", nsPath(ns, "/v1/tasks/batch"), key, body, headers...).decode(s.t, &out)
	return out.Tasks
}

// myEvents returns the caller's audit events, oldest first.
func (s *testServer) myEvents(key, action string) []tessera.AuditEvent {
	s.t.Helper()
	var page core.AuditPage
	s.must(200, "GET", "/v1/me/audit?limit=200&action="+action, key, nil).decode(s.t, &page)
	slices.Reverse(page.Events)
	return page.Events
}

func TestBatchEnqueueAnswersInRequestOrder(t *testing.T) {
	s := newTestServer(t)
	producer, producerID := s.newKey("service", "namespace:*", "enqueue", "read")
	later := s.Clock.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	body := map[string]any{"tasks": []map[string]any{
		{"title": "first", "queue": "a", "payload": map[string]any{"n": 1}, "labels": []string{"x"}, "priority": 5},
		{"title": "second", "queue": "b", "public": true},
		{"title": "third", "run_at": later, "max_attempts": 1},
	}}
	tasks := s.enqueueBatch("main", producer, body)
	if len(tasks) != 3 {
		t.Fatalf("%d tasks answered, want 3", len(tasks))
	}
	want := []struct {
		title, queue, state string
		public              bool
	}{{"first", "a", tessera.StateReady, false}, {"second", "b", tessera.StateReady, true}, {"third", "default", tessera.StateScheduled, false}}
	for i, w := range want {
		got := tasks[i]
		if got.Title != w.title || got.Queue != w.queue || got.State != w.state || got.Public != w.public || got.CreatedBy != producerID {
			t.Errorf("task %d: %+v, want %+v", i, got, w)
		}
		// Each task is stored as answered.
		var stored tessera.Task
		s.must(200, "GET", "/v1/tasks/"+got.ID, producer, nil).decode(t, &stored)
		if stored.Title != got.Title || stored.Queue != got.Queue || !stored.RunAt.Equal(got.RunAt) {
			t.Errorf("task %d stored as %+v, answered as %+v", i, stored, got)
		}
	}
	if string(tasks[0].Payload) != `{"n":1}` || !slices.Equal(tasks[0].Labels, []string{"x"}) || tasks[0].Priority != 5 ||
		!tasks[2].RunAt.Equal(later) || tasks[2].MaxAttempts != 1 {
		t.Fatalf("fields not kept: %+v", tasks)
	}
	// One task.enqueue event per task, in request order, exactly as single
	// enqueues of them would write; a public task shows on the feed.
	events := s.myEvents(producer, core.ActTaskEnqueue)
	if len(events) != 3 {
		t.Fatalf("%d task.enqueue events, want 3: %+v", len(events), events)
	}
	for i, e := range events {
		if e.Target != tasks[i].ID || e.Status != 201 || e.Namespace != "main" || !e.Time.Equal(events[0].Time) {
			t.Errorf("event %d: %+v, want target %s", i, e, tasks[i].ID)
		}
	}
	var feed core.ActivityPage
	s.must(200, "GET", "/v1/public/activity", "", nil).decode(t, &feed)
	if len(feed.Events) != 1 || feed.Events[0].Target != tasks[1].ID || feed.Events[0].Title != "second" {
		t.Fatalf("public activity: %+v", feed.Events)
	}
	// The namespaced route is the same route.
	farm := s.enqueueBatch("farm", producer, batchOf("farm", 2))
	if len(farm) != 2 || farm[0].Namespace != "farm" || farm[1].Title != "farm-1" {
		t.Fatalf("namespaced batch: %+v", farm)
	}
}

// A bad task anywhere refuses the whole batch, naming the task, and
// writes nothing: no task, no event, not even the namespace.
func TestBatchEnqueueAllOrNothing(t *testing.T) {
	s := newTestServer(t)
	producer, _ := s.newKey("service", "namespace:*", "enqueue", "read")
	withBad := func(i int, task string) string {
		tasks := make([]string, 250)
		for j := range tasks {
			tasks[j] = fmt.Sprintf(`{"title":"t-%d"}`, j)
		}
		tasks[i] = task
		return `{"tasks":[` + strings.Join(tasks, ",") + `]}`
	}
	cases := []struct {
		name, body, field string
	}{
		{"the 250th without a title", withBad(249, `{"queue":"q"}`), "tasks[249].title"},
		{"a bad queue", withBad(3, `{"title":"t","queue":"no spaces"}`), "tasks[3].queue"},
		{"an unknown field", withBad(7, `{"title":"t","nope":1}`), "tasks[7].nope"},
		{"a key in the wrong case", withBad(0, `{"TITLE":"t"}`), "tasks[0].TITLE"},
		{"a key given twice", withBad(1, `{"title":"a","title":"b"}`), "tasks[1].title"},
		{"a string for a number", withBad(2, `{"title":"t","priority":"high"}`), "tasks[2].priority"},
		{"a bad timestamp", withBad(4, `{"title":"t","run_at":"tomorrow"}`), "tasks[4].run_at"},
		{"a payload too large", withBad(5, `{"title":"t","payload":"`+strings.Repeat("p", core.MaxPayloadLen)+`"}`), "tasks[5].payload"},
		{"a task that is not an object", withBad(6, `"just a title"`), "tasks[6]"},
		{"a null task", withBad(8, `null`), "tasks[8]"},
		{"an empty batch", `{"tasks":[]}`, "tasks"},
		{"no tasks at all", `{}`, "tasks"},
		{"tasks not a list", `{"tasks":{"title":"t"}}`, "tasks"},
		{"a field beside tasks", `{"tasks":[{"title":"t"}],"queue":"q"}`, "queue"},
	}
	for _, tc := range cases {
		for _, ns := range []string{"main", "fresh"} {
			e := wantError(t, s.do("POST", nsPath(ns, "/v1/tasks/batch"), producer, tc.body), 400, "invalid_request", tc.field)
			if strings.HasPrefix(tc.field, "tasks[") && !strings.HasPrefix(e.Error.Message, strings.SplitN(tc.field, ".", 2)[0]+": ") {
				t.Errorf("%s: the message does not name the task: %q", tc.name, e.Error.Message)
			}
		}
	}
	if ids := s.listIDs("main", producer, ""); len(ids) != 0 {
		t.Fatalf("refused batches left tasks: %v", ids)
	}
	if events := s.myEvents(producer, core.ActTaskEnqueue); len(events) != 0 {
		t.Fatalf("refused batches left events: %+v", events)
	}
	var nss core.NamespacePage
	s.must(200, "GET", "/v1/admin/namespaces", adminKey, nil).decode(t, &nss)
	for _, n := range nss.Namespaces {
		if n.Name == "fresh" {
			t.Fatalf("a refused batch created its namespace: %+v", nss)
		}
	}
	// Each refusal is one counter under the batch's action.
	var page core.AuditPage
	s.must(200, "GET", "/v1/me/audit?action="+core.ActTaskEnqueueBatch, producer, nil).decode(t, &page)
	var refused int64
	for _, c := range page.Counters {
		if c.Outcome == "invalid_request" {
			refused += c.Count
		}
	}
	if refused != int64(2*len(cases)) {
		t.Fatalf("counted %d refusals, want %d: %+v", refused, 2*len(cases), page.Counters)
	}
}

func TestBatchEnqueueHoldsAtMost500(t *testing.T) {
	s := newTestServer(t)
	producer, _ := s.newKey("service", "namespace:main", "enqueue", "read")
	wantError(t, s.do("POST", "/v1/tasks/batch", producer, batchOf("over", core.MaxBatchTasks+1)), 400, "invalid_request", "tasks")
	tasks := s.enqueueBatch("main", producer, batchOf("full", core.MaxBatchTasks))
	if len(tasks) != 500 || tasks[0].Title != "full-0" || tasks[499].Title != "full-499" {
		t.Fatalf("answered %d tasks: first %q, last %q", len(tasks), tasks[0].Title, tasks[len(tasks)-1].Title)
	}
	var counts struct {
		Queues map[string]map[string]int `json:"queues"`
	}
	s.must(200, "GET", "/v1/counts", producer, nil).decode(t, &counts)
	if counts.Queues["default"]["ready"] != 500 {
		t.Fatalf("counts after 501 refused and 500 taken: %v", counts.Queues)
	}
}

// The body limit (1 MiB) holds for a batch as for any body: a batch of
// exactly 1 MiB is taken, one byte more is refused before it is read.
func TestBatchEnqueueBodyLimit(t *testing.T) {
	s := newTestServer(t)
	producer, _ := s.newKey("service", "namespace:main", "enqueue", "read")
	// Four tasks with payloads near their own limit, and a fifth whose
	// brief pads the body to size bytes.
	body := func(size int) string {
		var b strings.Builder
		b.WriteString(`{"tasks":[`)
		for i := range 4 {
			fmt.Fprintf(&b, `{"title":"big-%d","payload":"%s"},`, i, strings.Repeat("p", 250_000))
		}
		pad := size - b.Len() - len(`{"title":"pad","brief":""}]}`)
		fmt.Fprintf(&b, `{"title":"pad","brief":"%s"}]}`, strings.Repeat("b", pad))
		if b.Len() != size {
			t.Fatalf("body of %d bytes, want %d", b.Len(), size)
		}
		return b.String()
	}
	wantError(t, s.do("POST", "/v1/tasks/batch", producer, body(1<<20+1)), 413, "payload_too_large", "")
	if ids := s.listIDs("main", producer, ""); len(ids) != 0 {
		t.Fatalf("a refused body left tasks: %v", ids)
	}
	if tasks := s.enqueueBatch("main", producer, body(1<<20)); len(tasks) != 5 || tasks[4].Title != "pad" {
		t.Fatalf("a batch at the limit: %d tasks", len(tasks))
	}
}

// One Idempotency-Key covers the whole batch: a repeat answers the first
// response and creates nothing; the same key with another batch is a
// conflict.
func TestBatchEnqueueIdempotent(t *testing.T) {
	s := newTestServer(t)
	producer, _ := s.newKey("service", "namespace:main", "enqueue", "read", "claim")
	body := map[string]any{"tasks": []map[string]any{{"title": "a", "payload": map[string]any{"n": 1}}, {"title": "b"}}}
	first := s.must(201, "POST", "/v1/tasks/batch", producer, body, "Idempotency-Key", "batch-1")
	// A claim moves the first task on; the replay still says ready.
	s.claim("main", producer, "default")
	spelled := `{"tasks": [ {"payload": {"n": 1}, "title": "a"}, {"title": "b"} ]}`
	for i, b := range []any{body, spelled} {
		again := s.do("POST", "/v1/tasks/batch", producer, b, "Idempotency-Key", "batch-1")
		if again.Status != 201 || !bytes.Equal(again.Body, first.Body) {
			t.Fatalf("repeat %d: %d %s, want %s", i, again.Status, again.Body, first.Body)
		}
	}
	if ids := s.listIDs("main", producer, ""); len(ids) != 2 {
		t.Fatalf("repeats created tasks: %v", ids)
	}
	for _, other := range []any{batchOf("other", 2), map[string]any{"tasks": []map[string]any{{"title": "a", "payload": map[string]any{"n": 1}}}}} {
		wantError(t, s.do("POST", "/v1/tasks/batch", producer, other, "Idempotency-Key", "batch-1"), 409, "idempotency_conflict", "")
	}
	// The key belongs to the route, as every key does: a single enqueue
	// with it is another request.
	s.must(201, "POST", "/v1/tasks", producer, map[string]any{"title": "single"}, "Idempotency-Key", "batch-1")
	if ids := s.listIDs("main", producer, ""); len(ids) != 3 {
		t.Fatalf("want 3 tasks, got %v", ids)
	}
	// A replay is no action: two task.enqueue events for the batch, one
	// for the single enqueue, and the replays counted.
	if events := s.myEvents(producer, core.ActTaskEnqueue); len(events) != 3 {
		t.Fatalf("%d task.enqueue events, want 3", len(events))
	}
	var page core.AuditPage
	s.must(200, "GET", "/v1/me/audit?outcome=replayed", producer, nil).decode(t, &page)
	if len(page.Counters) != 1 || page.Counters[0].Action != core.ActTaskEnqueueBatch || page.Counters[0].Count != 2 {
		t.Fatalf("replay counters: %+v", page.Counters)
	}
}

// A batch wakes the long-polling claims of every queue it touches.
func TestBatchEnqueueWakesEveryQueue(t *testing.T) {
	s := newTestServer(t)
	producer, _ := s.newKey("service", "namespace:main", "enqueue", "read")
	worker, _ := s.newKey("agent", "namespace:main", "claim")
	queues := []string{"lp-a", "lp-b", "lp-c"}
	waits := make([]<-chan asyncResult, len(queues))
	for i, q := range queues {
		waits[i] = s.async(10*time.Second, "POST", "/v1/claims", worker, map[string]any{"queue": q, "wait_seconds": 20})
	}
	parked()
	body := map[string]any{"tasks": []map[string]any{
		{"title": "for a", "queue": "lp-a"}, {"title": "for b", "queue": "lp-b"}, {"title": "for c", "queue": "lp-c"}, {"title": "more for a", "queue": "lp-a"},
	}}
	tasks := s.enqueueBatch("main", producer, body)
	for i, ch := range waits {
		r := await(t, ch)
		if r.Status != 200 {
			t.Fatalf("long-poll on %s: %d %s", queues[i], r.Status, r.Body)
		}
		var c claimed
		r.decode(t, &c)
		if c.Task.Queue != queues[i] || c.Task.ID != tasks[i].ID {
			t.Fatalf("long-poll on %s got %+v", queues[i], c.Task)
		}
	}
}

// Rows per task in a batch are at most a single enqueue's (issue 12). A
// warm single enqueue writes 4 rows: the task row and its tasks_claim
// index entry, its queue's trigger-kept task_counts row, and its audit
// event. A batch of 100 writes exactly that per task — each task keeps
// its own event — so 400; with an Idempotency-Key the key's row and its
// index entry are 2 rows for the whole batch (402), where each single
// enqueue pays them (6).
func TestBatchEnqueueRowsPerTask(t *testing.T) {
	// The exact figures are the SQLite meter's (SPEC §14's table).
	sqliteOnly(t)
	s := newTestServer(t)
	producer, _ := s.newKey("service", "namespace:main", "enqueue", "read")
	// Warm: the namespace recorded, the key resolved, its profile written.
	s.enqueue("main", producer, map[string]any{"title": "warm-up"})
	s.enqueueBatch("main", producer, batchOf("warm-up", 2))

	single := s.rowsWritten(func() { s.enqueue("main", producer, map[string]any{"title": "one"}) })
	batch := s.rowsWritten(func() { s.enqueueBatch("main", producer, batchOf("many", 100)) })
	singleKeyed := s.rowsWritten(func() {
		s.must(201, "POST", "/v1/tasks", producer, map[string]any{"title": "one"}, "Idempotency-Key", "single-1")
	})
	batchKeyed := s.rowsWritten(func() { s.enqueueBatch("main", producer, batchOf("many", 100), "Idempotency-Key", "batch-1") })
	t.Logf("rows written: single enqueue %d, batch of 100 %d (%.2f a task); with Idempotency-Key %d and %d (%.2f a task)",
		single, batch, float64(batch)/100, singleKeyed, batchKeyed, float64(batchKeyed)/100)
	if single != 4 || batch != 400 || singleKeyed != 6 || batchKeyed != 402 {
		t.Fatalf("rows written: single %d, batch of 100 %d, keyed %d and %d; want 4, 400, 6 and 402", single, batch, singleKeyed, batchKeyed)
	}
}

// A key without the enqueue scope is refused at the edge, as for a single
// enqueue.
func TestBatchEnqueueNeedsTheEnqueueScope(t *testing.T) {
	s := newTestServer(t)
	reader, _ := s.newKey("agent", "namespace:main", "read")
	wantError(t, s.do("POST", "/v1/tasks/batch", reader, batchOf("no", 1)), 403, "forbidden", "")
	wantError(t, s.do("POST", "/ns/elsewhere/v1/tasks/batch", reader, batchOf("no", 1)), 403, "forbidden", "")
	if ids := s.listIDs("main", reader, ""); len(ids) != 0 {
		t.Fatalf("a refused batch left tasks: %v", ids)
	}
}

// The API description lists the route under /v1 and /ns/{namespace}/v1,
// with its body and its 201 answer.
func TestBatchEnqueueInOpenAPI(t *testing.T) {
	s := newTestServer(t)
	var doc struct {
		Paths map[string]map[string]struct {
			RequestBody struct {
				Content map[string]struct {
					Schema map[string]any `json:"schema"`
				} `json:"content"`
			} `json:"requestBody"`
			Responses map[string]json.RawMessage `json:"responses"`
		} `json:"paths"`
		Components struct {
			Schemas map[string]struct {
				Properties map[string]map[string]any `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	s.must(200, "GET", "/v1/openapi.json", "", nil).decode(t, &doc)
	for _, path := range []string{"/v1/tasks/batch", "/ns/{namespace}/v1/tasks/batch"} {
		op, ok := doc.Paths[path]["post"]
		if !ok {
			t.Fatalf("the OpenAPI document has no POST %s", path)
		}
		if ref := op.RequestBody.Content["application/json"].Schema["$ref"]; ref != "#/components/schemas/CoreEnqueueBatchParams" {
			t.Errorf("POST %s body: %v", path, ref)
		}
		if !bytes.Contains(op.Responses["201"], []byte(`"#/components/schemas/CoreTaskBatch"`)) {
			t.Errorf("POST %s answers: %s", path, op.Responses["201"])
		}
	}
	items, _ := doc.Components.Schemas["CoreEnqueueBatchParams"].Properties["tasks"]["items"].(map[string]any)
	if items["$ref"] != "#/components/schemas/CoreEnqueueParams" {
		t.Fatalf("batch tasks are described as %v", items)
	}
}
