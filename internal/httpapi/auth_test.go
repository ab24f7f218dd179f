package httpapi_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/tessera"
)

// SPEC §4: 401 for every bad key, with one body; 403 for a missing grant or
// action scope; the checks happen at the edge, before any namespace work.

func TestAuthUnauthorizedMatrix(t *testing.T) {
	s := newTestServer(t)
	_, pid := s.newKey("agent", "namespace:main", "read")

	mint := func(scopes []string, expires *time.Time) string {
		body := map[string]any{"principal_id": pid, "scopes": scopes}
		if expires != nil {
			body["expires_at"] = expires
		}
		var k struct {
			Key string `json:"key"`
		}
		s.must(201, "POST", "/v1/admin/keys", adminKey, body).decode(t, &k)
		return k.Key
	}
	all := []string{"admin"}
	revoked := mint(all, nil)
	exp := s.Clock.Now().Add(2 * time.Second)
	expiring := mint(all, &exp)
	good := mint(all, nil)
	goodID := keyID(t, good)
	secret := good[len("tsk_"+goodID+"_"):]

	// Both bad keys work before they go bad, so their 401 below is not
	// just a malformed key.
	for _, k := range []string{revoked, expiring} {
		s.must(200, "GET", "/v1/me", k, nil)
	}
	s.revoke(revoked)
	// Past the key's expiry and past the authenticator's 5 s cache.
	s.Clock.Advance(6 * time.Second)

	// A 401 says what to do about what was sent — no key, the wrong
	// header or scheme, a string that is no key at all — but never tells
	// an unknown key from an expired or revoked one: those four (says "")
	// answer one body, so a 401 is no oracle for which keys exist.
	type cred struct {
		name    string
		headers []string // header name, value pairs
		says    string
	}
	bearer := func(v string) []string { return []string{"Authorization", v} }
	const notAKey = "not a Tessera key"
	creds := []cred{
		{"missing header", nil, "a key is required"},
		{"the key in X-Api-Key", []string{"X-Api-Key", good}, "not in X-Api-Key"},
		{"the key without its scheme", bearer(good), "without its scheme"},
		{"not bearer", bearer("Basic dXNlcjpwYXNz"), "scheme must be Bearer"},
		{"empty bearer", bearer("Bearer "), notAKey},
		{"malformed key", bearer("Bearer not-a-key"), notAKey},
		{"malformed secret", bearer("Bearer tsk_" + goodID + "_short"), notAKey},
		{"unknown key id", bearer("Bearer tsk_nosuchkey0000_" + secret), ""},
		{"wrong secret", bearer("Bearer tsk_" + goodID + "_" + repeat("Z", len(secret))), ""},
		{"expired key", bearer("Bearer " + expiring), ""},
		{"revoked key", bearer("Bearer " + revoked), ""},
	}
	routes := []struct {
		method, path string
		body         any
	}{
		{"GET", "/v1/tasks", nil},
		{"POST", "/v1/tasks", map[string]any{"title": "x"}},
		{"POST", "/v1/claims", map[string]any{}},
		{"GET", "/v1/me", nil},
		{"GET", "/v1/admin/principals", nil},
		{"GET", "/ns/other/v1/counts", nil},
		{"POST", "/v1/tasks/01ARZ3NDEKTSV4RRFFQ69G5FAV/cancel", nil},
	}
	var invalid []byte
	for _, c := range creds {
		for _, rt := range routes {
			r := s.do(rt.method, rt.path, "", rt.body, c.headers...)
			e := wantError(t, r, 401, "unauthorized", "")
			if !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("%s %s with %s: WWW-Authenticate %q", rt.method, rt.path, c.name, r.Header.Get("WWW-Authenticate"))
			}
			switch {
			case c.says != "" && !strings.Contains(e.Error.Message, c.says):
				t.Fatalf("%s %s with %s: %q does not say %q", rt.method, rt.path, c.name, e.Error.Message, c.says)
			case c.says != "":
			case invalid == nil:
				invalid = r.Body
			case !bytes.Equal(r.Body, invalid):
				t.Fatalf("%s %s with %s: body %s differs from %s", rt.method, rt.path, c.name, r.Body, invalid)
			}
		}
	}
	// The good key still works; nothing above created the other namespace.
	s.must(200, "GET", "/v1/me", good, nil)
	if ns := s.namespaces(); slices.Contains(ns, "other") {
		t.Fatalf("a refused request created a namespace: %v", ns)
	}
}

// A revocation is seen at once on the node that revoked, despite the cache.
func TestAuthRevokedAtOnce(t *testing.T) {
	s := newTestServer(t)
	key, _ := s.newKey("agent", "namespace:main", "read")
	s.must(200, "GET", "/v1/tasks", key, nil) // now cached
	s.revoke(key)
	wantError(t, s.do("GET", "/v1/tasks", key, nil), 401, "unauthorized", "")
}

// The authentication scheme is case-insensitive (RFC 7235 §2.1).
func TestAuthSchemeCaseInsensitive(t *testing.T) {
	s := newTestServer(t)
	for _, scheme := range []string{"Bearer", "bearer", "BEARER"} {
		s.must(200, "GET", "/v1/me", "", nil, "Authorization", scheme+" "+adminKey)
	}
}

func TestAuthForbidden(t *testing.T) {
	s := newTestServer(t)
	reader, _ := s.newKey("agent", "namespace:main", "read")
	claimer, _ := s.newKey("agent", "namespace:main", "claim")
	enqueuer, _ := s.newKey("service", "namespace:main", "enqueue")
	alpha, _ := s.newKey("service", "namespace:alpha", "read", "enqueue", "claim")
	noGrant, _ := s.newKey("service", "read", "enqueue", "claim", "write")
	task := s.enqueue("main", adminKey, map[string]any{})
	enq := map[string]any{"title": "x"}

	cases := []struct {
		name         string
		key          string
		method, path string
		body         any
	}{
		{"read-only key enqueues", reader, "POST", "/v1/tasks", enq},
		{"read-only key claims", reader, "POST", "/v1/claims", map[string]any{}},
		{"read-only key cancels", reader, "POST", "/v1/tasks/" + task.ID + "/cancel", nil},
		{"claim-only key lists", claimer, "GET", "/v1/tasks", nil},
		{"claim-only key reads a task", claimer, "GET", "/v1/tasks/" + task.ID, nil},
		{"claim-only key counts", claimer, "GET", "/v1/counts", nil},
		{"claim-only key enqueues", claimer, "POST", "/v1/tasks", enq},
		{"enqueue-only key claims", enqueuer, "POST", "/v1/claims", map[string]any{}},
		{"enqueue-only key lists", enqueuer, "GET", "/v1/tasks", nil},
		{"actions without any grant", noGrant, "GET", "/v1/tasks", nil},
		{"actions without any grant, enqueue", noGrant, "POST", "/v1/tasks", enq},
		{"alpha key in main", alpha, "GET", "/v1/tasks", nil},
		{"alpha key in beta", alpha, "POST", "/ns/beta/v1/tasks", enq},
		{"alpha key claims in beta", alpha, "POST", "/ns/beta/v1/claims", map[string]any{}},
		{"alpha key counts in beta", alpha, "GET", "/ns/beta/v1/counts", nil},
		{"non-admin lists principals", reader, "GET", "/v1/admin/principals", nil},
		{"non-admin creates a principal", enqueuer, "POST", "/v1/admin/principals", map[string]any{"kind": "agent"}},
		{"non-admin lists keys", alpha, "GET", "/v1/admin/keys", nil},
		{"non-admin revokes a key", noGrant, "DELETE", "/v1/admin/keys/" + keyID(t, reader), nil},
		{"non-admin lists namespaces", claimer, "GET", "/v1/admin/namespaces", nil},
		{"non-admin reads storage", reader, "GET", "/v1/admin/storage", nil},
		{"non-admin in another namespace's admin", alpha, "GET", "/ns/alpha/v1/admin/keys", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, s.do(tc.method, tc.path, tc.key, tc.body), 403, "forbidden", "")
		})
	}
	// Nothing was done: the task is untouched, no task was added, the
	// reader's key is not revoked, beta does not exist.
	if got := s.task("main", adminKey, task.ID); got.State != tessera.StateReady || got.Attempts != 0 {
		t.Fatalf("task after refused requests: %s attempts %d", got.State, got.Attempts)
	}
	if ids := s.listIDs("main", adminKey, ""); len(ids) != 1 {
		t.Fatalf("tasks after refused enqueues: %v", ids)
	}
	s.must(200, "GET", "/v1/tasks", reader, nil)
	if ns := s.namespaces(); slices.Contains(ns, "beta") {
		t.Fatalf("a refused request created namespace beta: %v", ns)
	}

	// The grants do work where given.
	s.must(200, "GET", "/ns/alpha/v1/tasks", alpha, nil)
	s.must(200, "GET", "/v1/tasks", reader, nil)
	s.must(204, "POST", "/v1/claims", claimer, map[string]any{"queue": "nothing-here"})
	s.must(201, "POST", "/v1/tasks", enqueuer, enq)
}

func TestAuthNamespaceWildcard(t *testing.T) {
	s := newTestServer(t)
	wild, _ := s.newKey("service", "namespace:*", "read", "enqueue", "claim")
	for _, ns := range []string{"main", "alpha", "beta-2", "x"} {
		task := s.enqueue(ns, wild, map[string]any{})
		if got := s.task(ns, wild, task.ID); got.Namespace != ns {
			t.Fatalf("task in %s reads back in %q", ns, got.Namespace)
		}
		if c := s.claim(ns, wild, "default"); c.Task.ID != task.ID {
			t.Fatalf("claim in %s: %s", ns, c.Task.ID)
		}
	}
	// namespace:* is not admin.
	wantError(t, s.do("GET", "/v1/admin/namespaces", wild, nil), 403, "forbidden", "")
}

// GET /v1/me answers for any valid key, whatever its scopes.
func TestAuthMe(t *testing.T) {
	s := newTestServer(t)
	key, pid := s.newKey("agent", "namespace:alpha", "claim")
	var me struct {
		Principal tessera.Principal `json:"principal"`
		KeyID     string            `json:"key_id"`
		Scopes    []string          `json:"scopes"`
	}
	s.must(200, "GET", "/v1/me", key, nil).decode(t, &me)
	if me.Principal.ID != pid || me.KeyID != keyID(t, key) || !slices.Equal(me.Scopes, []string{"namespace:alpha", "claim"}) {
		t.Fatalf("me: %+v", me)
	}
	s.must(200, "GET", "/ns/beta/v1/me", key, nil) // any valid key, any namespace
}
