package httpapi_test

import (
	"slices"
	"testing"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// Namespaces are isolated tenants (SPEC §1, §3, §4).

func TestNamespaceIsolation(t *testing.T) {
	s := newTestServer(t)
	alphaKey, _ := s.newKey("service", "namespace:alpha", "read", "enqueue", "claim")
	wide, _ := s.newKey("service", "namespace:*", "read", "enqueue", "claim")

	task := s.enqueue("alpha", alphaKey, map[string]any{"queue": "q"})
	if task.Namespace != "alpha" {
		t.Fatalf("namespace %q", task.Namespace)
	}
	if got := s.task("alpha", wide, task.ID); got.ID != task.ID {
		t.Fatalf("read back in alpha: %+v", got)
	}

	for _, ns := range []string{"beta", "main"} {
		if ids := s.listIDs(ns, wide, ""); len(ids) != 0 {
			t.Fatalf("%s lists alpha's task: %v", ns, ids)
		}
		if ids := s.listIDs(ns, wide, "?queue=q"); len(ids) != 0 {
			t.Fatalf("%s lists alpha's queue: %v", ns, ids)
		}
		wantError(t, s.do("GET", nsPath(ns, "/v1/tasks/"+task.ID), wide, nil), 404, "not_found", "")
		wantError(t, s.change(ns, wide, task.ID, "cancel"), 404, "not_found", "")
		s.emptyClaim(ns, wide, "q")
		var counts struct {
			Queues map[string]map[string]int `json:"queues"`
		}
		s.must(200, "GET", nsPath(ns, "/v1/counts"), wide, nil).decode(t, &counts)
		if len(counts.Queues) != 0 {
			t.Fatalf("%s counts alpha's task: %v", ns, counts.Queues)
		}
	}
	// Still ready in alpha, claimable only there.
	if c := s.claim("alpha", wide, "q"); c.Task.ID != task.ID {
		t.Fatalf("claim in alpha: %s", c.Task.ID)
	}
}

// A key granted only alpha is refused in beta at the edge, and the refusal
// creates nothing.
func TestNamespaceForbiddenCreatesNothing(t *testing.T) {
	s := newTestServer(t)
	alphaKey, _ := s.newKey("service", "namespace:alpha", "read", "enqueue", "claim")
	s.enqueue("alpha", alphaKey, map[string]any{})

	for _, rq := range []struct {
		method, path string
		body         any
	}{
		{"POST", "/ns/beta/v1/tasks", map[string]any{"title": "x"}},
		{"GET", "/ns/beta/v1/tasks", nil},
		{"POST", "/ns/beta/v1/claims", map[string]any{}},
		{"GET", "/ns/beta/v1/counts", nil},
	} {
		wantError(t, s.do(rq.method, rq.path, alphaKey, rq.body), 403, "forbidden", "")
	}
	ns := s.namespaces()
	if slices.Contains(ns, "beta") || !slices.Contains(ns, "alpha") {
		t.Fatalf("namespaces %v: want alpha and no beta", ns)
	}
}

// Reads and empty claims of a namespace never written answer empty and
// create nothing (docs/design.md, "Namespaces and retention").
func TestNamespaceUnwrittenReadsEmpty(t *testing.T) {
	s := newTestServer(t)
	key, _ := s.newKey("service", "namespace:gamma", "read", "enqueue", "claim")

	r := s.must(200, "GET", "/ns/gamma/v1/tasks", key, nil)
	var page struct {
		Tasks []tessera.Task `json:"tasks"`
	}
	r.decode(t, &page)
	if page.Tasks == nil || len(page.Tasks) != 0 {
		t.Fatalf("tasks of an unwritten namespace: %s (want \"tasks\": [])", r.Body)
	}
	counts := s.must(200, "GET", "/ns/gamma/v1/counts", key, nil)
	if string(counts.Body) != "{\"queues\":{}}\n" {
		t.Fatalf("counts of an unwritten namespace: %s", counts.Body)
	}
	s.emptyClaim("gamma", key, "default")
	wantError(t, s.do("GET", "/ns/gamma/v1/tasks/01ARZ3NDEKTSV4RRFFQ69G5FAV", key, nil), 404, "not_found", "")
	if ns := s.namespaces(); slices.Contains(ns, "gamma") {
		t.Fatalf("reads created gamma: %v", ns)
	}
	// The first write records it.
	s.enqueue("gamma", key, map[string]any{})
	if ns := s.namespaces(); !slices.Contains(ns, "gamma") {
		t.Fatalf("enqueue did not record gamma: %v", ns)
	}
}

func TestNamespaceInvalidNames(t *testing.T) {
	s := newTestServer(t)
	long63 := "a" + repeat("b", 62)
	for _, ns := range []string{"Bad_Name", "UPPER", "-lead", "has_underscore", "a.b", long63 + "c", repeat("x", 100)} {
		for _, rq := range []struct {
			method, path string
			body         any
		}{
			{"GET", "/ns/" + ns + "/v1/tasks", nil},
			{"POST", "/ns/" + ns + "/v1/tasks", map[string]any{"title": "x"}},
			{"POST", "/ns/" + ns + "/v1/claims", map[string]any{}},
		} {
			wantError(t, s.do(rq.method, rq.path, adminKey, rq.body), 400, "invalid_request", "namespace")
		}
	}
	// 63 characters is the longest valid name.
	task := s.enqueue(long63, adminKey, map[string]any{})
	if task.Namespace != long63 {
		t.Fatalf("namespace %q", task.Namespace)
	}
	for _, ns := range s.namespaces() {
		if !tessera.ValidNamespace(ns) {
			t.Fatalf("an invalid namespace was recorded: %q", ns)
		}
	}
}

// DELETE /v1/admin/namespaces/{ns} (SPEC §3.8) purges a namespace's tasks,
// runs, records, blobs and their bytes, audited; another namespace is
// untouched, main cannot be purged, and the namespace can be used again.
func TestNamespacePurge(t *testing.T) {
	s := newTestServer(t)
	key, _ := s.newKey("service", "namespace:*", "read", "enqueue", "claim", "write")
	var blobs []blobMeta
	for _, ns := range []string{"doomed", "kept"} {
		for range 3 {
			s.enqueue(ns, key, map[string]any{"queue": "q"})
		}
		c := s.claim(ns, key, "q")
		s.submit(ns, key, c, "succeeded")
		s.putRecord(201, ns, key, "notes/a", map[string]any{"value": map[string]any{"n": 1}})
		blobs = append(blobs, s.uploadBlob(ns, key, []byte("bytes of "+ns), nil))
	}
	if !s.bytesHeld(t, "doomed", blobs[0].SHA256) {
		t.Fatal("the doomed namespace's bytes are not where the test looks")
	}

	wantError(t, s.do("DELETE", "/v1/admin/namespaces/doomed", key, nil), 403, "forbidden", "")
	wantError(t, s.do("DELETE", "/v1/admin/namespaces/main", adminKey, nil), 409, "invalid_state", "")
	wantError(t, s.do("DELETE", "/v1/admin/namespaces/Bad_Name", adminKey, nil), 400, "invalid_request", "ns")

	var purged core.Purged
	s.must(200, "DELETE", "/v1/admin/namespaces/doomed", adminKey, nil).decode(t, &purged)
	// At least the 8 rows the test made: 3 tasks (a task's run is on its
	// row), a record's head and version, its bucket, a blob, the
	// namespace's settings; a backend's count rows come on top, as many
	// as it keeps.
	if purged.Namespace != "doomed" || purged.RowsDeleted < 8 {
		t.Errorf("purge answered %+v", purged)
	}
	if names := s.namespaces(); slices.Contains(names, "doomed") || !slices.Contains(names, "kept") {
		t.Errorf("namespaces after the purge: %v", names)
	}
	if s.bytesHeld(t, "doomed", blobs[0].SHA256) {
		t.Error("the purged namespace's bytes are still stored")
	}
	if ids := s.listIDs("doomed", key, ""); len(ids) != 0 {
		t.Errorf("tasks after the purge: %v", ids)
	}
	wantError(t, s.do("GET", "/ns/doomed/v1/records/notes/a", key, nil), 404, "not_found", "")
	wantError(t, s.do("GET", "/ns/doomed/v1/blobs/"+blobs[0].SHA256, key, nil), 404, "not_found", "")
	var counts struct {
		Queues map[string]map[string]int `json:"queues"`
	}
	s.must(200, "GET", "/ns/doomed/v1/counts", key, nil).decode(t, &counts)
	if len(counts.Queues) != 0 {
		t.Errorf("counts after the purge: %v", counts.Queues)
	}
	// The other namespace keeps everything.
	if ids := s.listIDs("kept", key, ""); len(ids) != 3 {
		t.Errorf("kept lists %d tasks, want 3", len(ids))
	}
	s.must(200, "GET", "/ns/kept/v1/blobs/"+blobs[1].SHA256, key, nil)
	// The purge is audited, in main.
	var audit core.AuditPage
	s.must(200, "GET", "/v1/admin/audit?action="+core.ActNamespacePurge, adminKey, nil).decode(t, &audit)
	if len(audit.Events) != 1 || audit.Events[0].Target != "doomed" || audit.Events[0].Namespace != tessera.MainNamespace {
		t.Errorf("purge events: %+v", audit.Events)
	}
	// The namespace can be written again, and is recorded again.
	s.enqueue("doomed", key, map[string]any{})
	if names := s.namespaces(); !slices.Contains(names, "doomed") {
		t.Errorf("a namespace written after its purge is not listed: %v", names)
	}
}

// GET /v1/admin/namespaces pages by name (it held 568 KB in one answer at
// 10,000 namespaces).
func TestAdminNamespacesPage(t *testing.T) {
	s := newTestServer(t)
	key, _ := s.newKey("service", "namespace:*", "enqueue")
	for _, ns := range []string{"n-c", "n-a", "n-b"} {
		s.enqueue(ns, key, map[string]any{})
	}
	var page core.NamespacePage
	s.must(200, "GET", "/v1/admin/namespaces?limit=2", adminKey, nil).decode(t, &page)
	if len(page.Namespaces) != 2 || page.Namespaces[0].Name != "n-a" || page.Namespaces[1].Name != "n-b" || page.NextCursor == "" {
		t.Fatalf("first page: %+v", page)
	}
	var next core.NamespacePage
	s.must(200, "GET", "/v1/admin/namespaces?limit=2&cursor="+page.NextCursor, adminKey, nil).decode(t, &next)
	if len(next.Namespaces) != 1 || next.Namespaces[0].Name != "n-c" || next.NextCursor != "" {
		t.Errorf("second page: %+v", next)
	}
	wantError(t, s.do("GET", "/v1/admin/namespaces?limit=201", adminKey, nil), 400, "invalid_request", "limit")
}
