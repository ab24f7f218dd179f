package httpapi_test

import (
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/tessera"
)

// GET /v1/counts, GET /v1/tasks filters and pagination, GET /v1/admin/storage.

func TestCountsShape(t *testing.T) {
	s := newTestServer(t)
	producer, _ := s.newKey("service", "namespace:main", "enqueue", "read")
	worker, _ := s.newKey("agent", "namespace:main", "claim")

	s.enqueue("main", producer, map[string]any{"queue": "a"})
	s.enqueue("main", producer, map[string]any{"queue": "a"})
	s.enqueue("main", producer, map[string]any{"queue": "a", "run_at": s.Clock.Now().Add(time.Hour)})
	s.claim("main", worker, "a")
	p := s.enqueue("main", producer, map[string]any{"queue": "b"})
	s.must(200, "POST", "/v1/tasks/"+p.ID+"/pause", producer, nil)
	s.enqueue("main", producer, map[string]any{"queue": "c"})
	s.submit("main", worker, s.claim("main", worker, "c"), "succeeded")

	r := s.must(200, "GET", "/v1/counts", producer, nil)
	want := `{"queues":{"a":{"leased":1,"ready":1,"scheduled":1},"b":{"paused":1},"c":{"succeeded":1}}}` + "\n"
	if string(r.Body) != want {
		t.Fatalf("counts:\n got %s\nwant %s", r.Body, want)
	}
	// Once the scheduled task's time comes it counts as ready.
	s.Clock.Advance(time.Hour)
	var counts struct {
		Queues map[string]map[string]int `json:"queues"`
	}
	s.must(200, "GET", "/v1/counts", producer, nil).decode(t, &counts)
	if counts.Queues["a"]["ready"] != 2 || counts.Queues["a"]["scheduled"] != 0 {
		t.Fatalf("counts after run_at: %v", counts.Queues)
	}
}

func TestListFilters(t *testing.T) {
	s := newTestServer(t)
	producer, _ := s.newKey("service", "namespace:main", "enqueue", "read")
	worker, _ := s.newKey("agent", "namespace:main", "claim")

	ready := s.enqueue("main", producer, map[string]any{"queue": "q1", "labels": []string{"red", "big"}})
	sched := s.enqueue("main", producer, map[string]any{"queue": "q1", "labels": []string{"red"}, "run_at": s.Clock.Now().Add(time.Hour)})
	leased := s.enqueue("main", producer, map[string]any{"queue": "q2", "labels": []string{"big"}})
	s.claim("main", worker, "q2")
	paused := s.enqueue("main", producer, map[string]any{"queue": "q2"})
	s.must(200, "POST", "/v1/tasks/"+paused.ID+"/pause", producer, nil)
	canceled := s.enqueue("main", producer, map[string]any{"queue": "q3", "labels": []string{"red"}})
	s.must(200, "POST", "/v1/tasks/"+canceled.ID+"/cancel", producer, nil)

	cases := []struct {
		query string
		want  []string // newest first
	}{
		{"", []string{canceled.ID, paused.ID, leased.ID, sched.ID, ready.ID}},
		{"?state=ready", []string{ready.ID}},
		{"?state=scheduled", []string{sched.ID}},
		{"?state=leased", []string{leased.ID}},
		{"?state=paused", []string{paused.ID}},
		{"?state=canceled", []string{canceled.ID}},
		{"?state=succeeded", []string{}},
		{"?queue=q1", []string{sched.ID, ready.ID}},
		{"?queue=q2", []string{paused.ID, leased.ID}},
		{"?queue=nope", []string{}},
		{"?label=red", []string{canceled.ID, sched.ID, ready.ID}},
		{"?label=big", []string{leased.ID, ready.ID}},
		{"?label=re", []string{}},
		{"?label=red&queue=q1&state=ready", []string{ready.ID}},
		{"?label=red&state=scheduled", []string{sched.ID}},
	}
	for _, tc := range cases {
		if got := s.listIDs("main", producer, tc.query); !slices.Equal(got, tc.want) {
			t.Errorf("GET /v1/tasks%s: got %v, want %v", tc.query, got, tc.want)
		}
	}
	// Listed tasks show their visible state.
	var page struct {
		Tasks []tessera.Task `json:"tasks"`
	}
	s.must(200, "GET", "/v1/tasks?queue=q1", producer, nil).decode(t, &page)
	if page.Tasks[0].State != tessera.StateScheduled || page.Tasks[1].State != tessera.StateReady {
		t.Fatalf("listed states: %s, %s", page.Tasks[0].State, page.Tasks[1].State)
	}
	// The scheduled task becomes ready with time.
	s.Clock.Advance(time.Hour)
	if got := s.listIDs("main", producer, "?state=ready"); !slices.Equal(got, []string{sched.ID, ready.ID}) {
		t.Fatalf("ready after run_at: %v", got)
	}
	if got := s.listIDs("main", producer, "?state=scheduled"); len(got) != 0 {
		t.Fatalf("scheduled after run_at: %v", got)
	}
}

func TestListPagination(t *testing.T) {
	s := newTestServer(t)
	producer, _ := s.newKey("service", "namespace:main", "enqueue", "read")
	var all []string
	for i := 0; i < 23; i++ {
		q := "even"
		if i%2 == 1 {
			q = "odd"
		}
		all = append(all, s.enqueue("main", producer, map[string]any{"queue": q}).ID)
	}
	slices.Reverse(all) // newest first

	walk := func(query url.Values) (ids []string, pages int) {
		t.Helper()
		cursor := ""
		for {
			q := url.Values{}
			for k, v := range query {
				q[k] = v
			}
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			var page struct {
				Tasks      []tessera.Task `json:"tasks"`
				NextCursor string         `json:"next_cursor"`
			}
			s.must(200, "GET", "/v1/tasks?"+q.Encode(), producer, nil).decode(t, &page)
			pages++
			for _, tk := range page.Tasks {
				ids = append(ids, tk.ID)
			}
			if page.NextCursor == "" {
				return ids, pages
			}
			if len(page.Tasks) == 0 || pages > 100 {
				t.Fatalf("a page with a next cursor but no progress")
			}
			cursor = page.NextCursor
		}
	}

	for _, limit := range []string{"1", "5", "10", "23", "200"} {
		ids, pages := walk(url.Values{"limit": {limit}})
		if !slices.Equal(ids, all) {
			t.Fatalf("limit %s: walked %v\nwant %v", limit, ids, all)
		}
		n := map[string]int{"1": 23, "5": 5, "10": 3, "23": 1, "200": 1}[limit]
		if pages != n {
			t.Fatalf("limit %s: %d pages, want %d", limit, pages, n)
		}
	}
	// The default page size is 50: one page here.
	if ids, pages := walk(url.Values{}); pages != 1 || len(ids) != 23 {
		t.Fatalf("default limit: %d pages, %d tasks", pages, len(ids))
	}
	// Filters hold across pages.
	var odd []string
	for i, id := range all {
		if i%2 == 1 { // all is reversed: index 0 is task 22 (even)
			odd = append(odd, id)
		}
	}
	if ids, _ := walk(url.Values{"limit": {"4"}, "queue": {"odd"}}); !slices.Equal(ids, odd) {
		t.Fatalf("odd queue across pages: %v\nwant %v", ids, odd)
	}
	// A task enqueued while walking appears on no later page (newest first)
	// and does not shift the pages that follow.
	var first struct {
		Tasks      []tessera.Task `json:"tasks"`
		NextCursor string         `json:"next_cursor"`
	}
	s.must(200, "GET", "/v1/tasks?limit=10", producer, nil).decode(t, &first)
	s.enqueue("main", producer, map[string]any{"queue": "even"})
	var second struct {
		Tasks []tessera.Task `json:"tasks"`
	}
	s.must(200, "GET", "/v1/tasks?limit=10&cursor="+url.QueryEscape(first.NextCursor), producer, nil).decode(t, &second)
	if len(second.Tasks) != 10 || second.Tasks[0].ID != all[10] {
		t.Fatalf("second page after an insert starts at %s, want %s", second.Tasks[0].ID, all[10])
	}
}

func TestAdminStorage(t *testing.T) {
	s := newTestServer(t)
	type totals struct {
		Day         string    `json:"day"`
		RowsWritten int64     `json:"rows_written"`
		RowsRead    int64     `json:"rows_read"`
		ResetAt     time.Time `json:"reset_at"`
	}
	var before, after totals
	s.must(200, "GET", "/v1/admin/storage", adminKey, nil).decode(t, &before)
	task := s.enqueue("main", adminKey, map[string]any{})
	s.task("main", adminKey, task.ID)
	s.must(200, "GET", "/v1/admin/storage", adminKey, nil).decode(t, &after)

	now := s.Clock.Now().UTC()
	if after.Day != now.Format(time.DateOnly) {
		t.Fatalf("day %q, want %q", after.Day, now.Format(time.DateOnly))
	}
	y, m, d := now.Date()
	if want := time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC); !after.ResetAt.Equal(want) {
		t.Fatalf("reset_at %s, want %s", after.ResetAt, want)
	}
	if after.RowsWritten <= before.RowsWritten || after.RowsWritten <= 0 {
		t.Fatalf("rows_written %d → %d after an enqueue", before.RowsWritten, after.RowsWritten)
	}
	if after.RowsRead <= before.RowsRead {
		t.Fatalf("rows_read %d → %d after reads", before.RowsRead, after.RowsRead)
	}
	// A new UTC day starts from zero.
	s.Clock.Set(after.ResetAt)
	var next totals
	s.must(200, "GET", "/v1/admin/storage", adminKey, nil).decode(t, &next)
	if next.Day == after.Day || !next.ResetAt.Equal(after.ResetAt.Add(24*time.Hour)) {
		t.Fatalf("next day: %+v", next)
	}
	if next.RowsWritten >= after.RowsWritten {
		t.Fatalf("next day did not start over: rows_written %d (yesterday %d)", next.RowsWritten, after.RowsWritten)
	}
}
