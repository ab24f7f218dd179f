package httpapi_test

import (
	"slices"
	"testing"

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
// create nothing (README design notes).
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
