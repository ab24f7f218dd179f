package httpapi_test

import (
	"strings"
	"testing"

	"github.com/tessera-dev/tessera/internal/httpapi"
)

// A browser asking for a namespace's board without a key gets a page
// that says what to do — open the console with a key — not a JSON 401;
// a program still gets the JSON error.
func TestBoardWithoutAKeyTellsABrowserWhatToDo(t *testing.T) {
	s := newTestServer(t)
	r := s.do("GET", "/ns/build-farm/board", "", nil, "Accept", "text/html,application/xhtml+xml")
	if r.Status != 401 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("a browser's keyless board: %d %s", r.Status, r.Header.Get("Content-Type"))
	}
	for _, want := range []string{"This page needs a key", `href="/console#/ns/build-farm"`, "<code>build-farm</code>"} {
		if !strings.Contains(string(r.Body), want) {
			t.Errorf("the page lacks %q:\n%s", want, r.Body)
		}
	}
	if csp := r.Header.Get("Content-Security-Policy"); csp != httpapi.ConsoleCSP || r.Header.Get("WWW-Authenticate") == "" {
		t.Errorf("the page's headers: %v", r.Header)
	}
	wantError(t, s.do("GET", "/ns/build-farm/board", "", nil, "Accept", "application/json"), 401, "unauthorized", "")
	wantError(t, s.do("GET", "/ns/build-farm/board", "", nil), 401, "unauthorized", "")
}

// The console is served from the binary under a strict policy: its own
// script and style only, no inline script, no eval, never framed; and it
// sets no cookie.
func TestConsoleIsServedUnderAStrictPolicy(t *testing.T) {
	s := newTestServer(t)
	page := s.must(200, "GET", "/console", "", nil)
	if ct := page.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Fatalf("console Content-Type %q", ct)
	}
	csp := page.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("the policy %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe") || page.Header.Get("Set-Cookie") != "" {
		t.Errorf("policy %q, cookie %q", csp, page.Header.Get("Set-Cookie"))
	}
	if strings.Contains(string(page.Body), "<script>") || !strings.Contains(string(page.Body), `<script src="/console/app.js" defer></script>`) {
		t.Errorf("the page's scripts:\n%s", page.Body)
	}
	js := s.must(200, "GET", "/console/app.js", "", nil)
	if !strings.HasPrefix(js.Header.Get("Content-Type"), "text/javascript") || js.Header.Get("ETag") == "" {
		t.Errorf("app.js headers: %v", js.Header)
	}
	for _, banned := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "localStorage", "document.cookie"} {
		if strings.Contains(string(js.Body), banned) {
			t.Errorf("app.js uses %s", banned)
		}
	}
	s.must(304, "GET", "/console/app.js", "", nil, "If-None-Match", js.Header.Get("ETag"))
	wantError(t, s.do("GET", "/console/nothing.js", "", nil), 404, "not_found", "")
}
