package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/tessera"
)

// Helpers shared by the end-to-end tests; harness_test.go holds the server.

// keyID returns the id part of a key "tsk_<id>_<secret>".
func keyID(t testing.TB, key string) string {
	t.Helper()
	parts := strings.SplitN(key, "_", 3)
	if len(parts) != 3 || parts[0] != "tsk" {
		t.Fatalf("not a key: %q", key)
	}
	return parts[1]
}

// errBody is the error shape of SPEC §5, decoded loosely so a test sees
// exactly what the server sent.
type errBody struct {
	Error struct {
		Code    string         `json:"code"`
		Message string         `json:"message"`
		Details map[string]any `json:"details"`
	} `json:"error"`
}

// wantError fails the test unless r is an error answer with status, code
// and, when field is not empty, details.field naming field. It returns the
// decoded body.
func wantError(t testing.TB, r *response, status int, code, field string) errBody {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d (%s): %s", r.Status, status, code, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("error Content-Type %q, want application/json: %s", ct, r.Body)
	}
	var e errBody
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		t.Fatalf("error body %s does not have the shape {\"error\":{code,message,details}}: %v", r.Body, err)
	}
	if e.Error.Code != code || r.errorCode() != code {
		t.Fatalf("error code %q, want %q: %s", e.Error.Code, code, r.Body)
	}
	if e.Error.Message == "" {
		t.Fatalf("error without a message: %s", r.Body)
	}
	if field != "" {
		if got, _ := e.Error.Details["field"].(string); got != field {
			t.Fatalf("details.field %q, want %q: %s", got, field, r.Body)
		}
	}
	return e
}

// task reads a task (with its runs) through the API.
func (s *testServer) task(ns, key, id string) tessera.Task {
	s.t.Helper()
	var t tessera.Task
	s.must(200, "GET", nsPath(ns, "/v1/tasks/"+id), key, nil).decode(s.t, &t)
	return t
}

// submit submits outcome for a held lease and returns the task.
func (s *testServer) submit(ns, key string, c claimed, outcome string) tessera.Task {
	s.t.Helper()
	var t tessera.Task
	s.must(200, "POST", nsPath(ns, "/v1/claims/"+c.Task.ID+"/submit"), key,
		map[string]any{"lease_token": c.Lease.Token, "outcome": outcome}).decode(s.t, &t)
	return t
}

// change applies cancel, pause, resume or retry and returns the response.
func (s *testServer) change(ns, key, id, verb string) *response {
	s.t.Helper()
	return s.do("POST", nsPath(ns, "/v1/tasks/"+id+"/"+verb), key, nil)
}

// emptyClaim claims from queue expecting 204 and returns its Retry-After.
func (s *testServer) emptyClaim(ns, key, queue string) string {
	s.t.Helper()
	r := s.must(204, "POST", nsPath(ns, "/v1/claims"), key, map[string]any{"queue": queue})
	if len(r.Body) != 0 {
		s.t.Fatalf("204 claim with a body: %q", r.Body)
	}
	return r.Header.Get("Retry-After")
}

// namespaces lists the namespaces the store has recorded.
func (s *testServer) namespaces() []string {
	s.t.Helper()
	var out struct {
		Namespaces []struct {
			Name string `json:"name"`
		} `json:"namespaces"`
	}
	s.must(200, "GET", "/v1/admin/namespaces", adminKey, nil).decode(s.t, &out)
	names := make([]string, 0, len(out.Namespaces))
	for _, n := range out.Namespaces {
		names = append(names, n.Name)
	}
	return names
}

// revoke revokes key with the admin key.
func (s *testServer) revoke(key string) {
	s.t.Helper()
	s.must(204, "DELETE", "/v1/admin/keys/"+keyID(s.t, key), adminKey, nil)
}

// listIDs lists task ids in ns for the query (e.g. "?state=ready").
func (s *testServer) listIDs(ns, key, query string) []string {
	s.t.Helper()
	var page struct {
		Tasks      []tessera.Task `json:"tasks"`
		NextCursor string         `json:"next_cursor"`
	}
	s.must(200, "GET", nsPath(ns, "/v1/tasks"+query), key, nil).decode(s.t, &page)
	ids := []string{}
	for _, t := range page.Tasks {
		ids = append(ids, t.ID)
	}
	return ids
}

// asyncResult is the outcome of a request sent from another goroutine.
type asyncResult struct {
	r   *response
	err error
}

// send is do for other goroutines: it returns errors instead of failing
// the test, and gives up after timeout.
func (s *testServer) send(client *http.Client, timeout time.Duration, method, path, key string, body any) (*response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.URL+path, rd)
	if err != nil {
		return nil, err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	return &response{Status: res.StatusCode, Header: res.Header, Body: b}, nil
}

// async sends a request on its own goroutine; the answer arrives on the
// returned channel.
func (s *testServer) async(timeout time.Duration, method, path, key string, body any) <-chan asyncResult {
	ch := make(chan asyncResult, 1)
	go func() {
		r, err := s.send(http.DefaultClient, timeout, method, path, key, body)
		ch <- asyncResult{r, err}
	}()
	return ch
}

// await waits for an async answer; the request's own timeout bounds it.
func await(t testing.TB, ch <-chan asyncResult) *response {
	t.Helper()
	res := <-ch
	if res.err != nil {
		t.Fatalf("request failed (did the long-poll not wake?): %v", res.err)
	}
	return res.r
}

// parked gives a long-poll just sent time to reach its wait. Nothing a
// test asserts depends on it being long enough: a poll that has not parked
// yet simply finds the work at once.
func parked() { time.Sleep(300 * time.Millisecond) }

// within fails unless at lies in [lo, hi].
func within(t testing.TB, what string, at, lo, hi time.Time) {
	t.Helper()
	if at.Before(lo) || at.After(hi) {
		t.Fatalf("%s = %s, want within [%s, %s]", what, at.Format(time.RFC3339Nano), lo.Format(time.RFC3339Nano), hi.Format(time.RFC3339Nano))
	}
}

func repeat(s string, n int) string { return strings.Repeat(s, n) }
