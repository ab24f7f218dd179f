package httpapi_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/app"
	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/httpapi"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// The edge of SPEC §5: every answer carries the error body, an oversized
// body reaches the client as 413, and a body that stalls is cut off.

// rawExchange writes req on a new connection and reads one answer.
func rawExchange(t *testing.T, url string, req []byte) *response {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	return readAnswer(t, bufio.NewReader(c))
}

func readAnswer(t *testing.T, br *bufio.Reader) *response {
	t.Helper()
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return &response{Status: res.StatusCode, Header: res.Header, Body: b}
}

func TestEveryAnswerHasTheErrorBody(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	task := s.enqueue("main", adminKey, map[string]any{})

	// Headers over the limit: net/http's own 431, with the error body.
	r := s.do("GET", "/v1/me", adminKey, nil, "X-Padding", strings.Repeat("p", httpapi.MaxHeaderBytes+8192))
	wantError(t, r, 431, "payload_too_large", "")
	// Requests net/http cannot parse.
	for name, req := range map[string]string{
		"no Host":          "GET /v1/me HTTP/1.1\r\n\r\n",
		"malformed header": "GET /v1/me HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n",
		"bad version":      "GET /v1/me HTTP/9.9\r\nHost: x\r\n\r\n",
		"bad encoding":     "POST /v1/tasks HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			r := rawExchange(t, s.URL, []byte(req))
			if r.Status < 400 {
				t.Fatalf("status %d", r.Status)
			}
			wantError(t, r, r.Status, "invalid_request", "")
		})
	}

	// Paths the mux would redirect: refused, naming the canonical path,
	// and acting on nothing.
	for _, p := range []string{"//v1/tasks", "/v1//tasks", "/v1/tasks/../counts", "/v1/./tasks", "/ns/alpha/v1/../../v1/tasks", "/v1/tasks/%2e%2e/counts"} {
		e := wantError(t, s.do("POST", p, adminKey, map[string]any{"title": "redirected?"}), 400, "invalid_request", "path")
		if !strings.Contains(e.Error.Message, "canonical") {
			t.Errorf("%s: %s", p, e.Error.Message)
		}
	}
	if ids := s.listIDs("main", adminKey, ""); len(ids) != 1 {
		t.Fatalf("a refused path enqueued: %v", ids)
	}

	// A known path under the wrong method is 405 with Allow.
	for _, c := range []struct{ method, path, allow string }{
		{"DELETE", "/v1/tasks", "GET, HEAD, POST"},
		{"PUT", "/ns/alpha/v1/tasks", "GET, HEAD, POST"},
		{"GET", "/v1/claims", "POST"},
		{"POST", "/v1/tasks/" + task.ID, "GET, HEAD"},
		{"GET", "/v1/admin/storage/allowance", "PUT"},
		{"DELETE", "/v1/records/b/k", "GET, HEAD, PUT"},
		{"POST", "/healthz", "GET, HEAD"},
		{"POST", "/v1/openapi.json", "GET, HEAD"},
	} {
		r := s.do(c.method, c.path, adminKey, nil)
		wantError(t, r, 405, "method_not_allowed", "")
		if got := r.Header.Get("Allow"); got != c.allow {
			t.Errorf("%s %s: Allow %q, want %q", c.method, c.path, got, c.allow)
		}
	}
	// Unknown routes stay 404, with or without a key.
	for _, p := range []string{"/v1/nope", "/v2/tasks", "/ns/alpha/v1/nope", "/nope"} {
		wantError(t, s.do("GET", p, "", nil), 404, "not_found", "")
	}
}

// bodyOf is a POST /v1/tasks body of n bytes.
func bodyOf(n int) []byte {
	return []byte(`{"title":"x","brief":"` + strings.Repeat("a", n-len(`{"title":"x","brief":""}`)) + `"}`)
}

// An oversized body is answered 413 and read to its end, so clients that
// write their whole body before they read (Go's net/http, Python's
// urllib) see the 413 rather than a connection reset.
func TestOversizedBodiesReach413(t *testing.T) {
	t.Parallel()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is needed to test a urllib client (`make test` installs it)")
	}
	s := newTestServer(t, func(c *core.Config) { c.MaxBlobBytes = 2 << 20 })
	const tries = 20
	sizes := []int{11 << 20 / 10, 5 << 20, 50 << 20}

	client := &http.Client{Transport: &http.Transport{}}
	goTries := func(method, path string, body []byte, chunked bool) (saw413 int, failures []string) {
		for range tries {
			var rd io.Reader = bytes.NewReader(body)
			if chunked {
				rd = io.MultiReader(rd) // hides the length: no Content-Length
			}
			req, _ := http.NewRequest(method, s.URL+path, rd)
			req.Header.Set("Authorization", "Bearer "+adminKey)
			res, err := client.Do(req)
			if err != nil {
				failures = append(failures, err.Error())
				continue
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode == 413 && strings.Contains(string(b), `"payload_too_large"`) {
				saw413++
			} else {
				failures = append(failures, fmt.Sprintf("%d %s", res.StatusCode, b))
			}
		}
		return saw413, failures
	}
	for _, n := range sizes {
		for _, chunked := range []bool{false, true} {
			if got, failures := goTries("POST", "/v1/tasks", bodyOf(n), chunked); got != tries {
				t.Errorf("Go client, %d bytes (chunked %v): %d/%d saw the 413; others: %.3q", n, chunked, got, tries, failures)
			}
		}
	}
	up := s.declare(201, "main", adminKey, []byte("x"), nil)
	if got, failures := goTries("PUT", "/v1/blobs/uploads/"+up.UploadID, make([]byte, 5<<20), false); got != tries {
		t.Errorf("Go client, 5 MiB blob over a 2 MiB limit: %d/%d saw the 413; others: %.3q", got, tries, failures)
	}

	// urllib sends the whole body, then reads.
	script := `
import sys, urllib.request, urllib.error
url, key, size, tries = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
method = sys.argv[5]
body = b'{"title":"x","brief":"' + b"a" * size + b'"}' if method == "POST" else b"\0" * size
saw = 0
for _ in range(tries):
    req = urllib.request.Request(url, data=body, method=method, headers={"Authorization": "Bearer " + key})
    try:
        urllib.request.urlopen(req, timeout=60).read()
    except urllib.error.HTTPError as e:
        if e.code == 413 and b'"payload_too_large"' in e.read():
            saw += 1
    except Exception as e:
        print(type(e).__name__, e, file=sys.stderr)
print(saw)
`
	pyTries := func(method, path string, n int) {
		out, err := exec.Command(python, "-c", script, s.URL+path, adminKey, fmt.Sprint(n), fmt.Sprint(tries), method).Output()
		if err != nil {
			t.Fatalf("python: %v", err)
		}
		if got := strings.TrimSpace(string(out)); got != fmt.Sprint(tries) {
			t.Errorf("urllib, %s %d bytes: %s/%d saw the 413", method, n, got, tries)
		}
	}
	for _, n := range sizes {
		pyTries("POST", "/v1/tasks", n)
	}
	pyTries("PUT", "/v1/blobs/uploads/"+up.UploadID, 5<<20)

	if ids := s.listIDs("main", adminKey, ""); len(ids) != 0 {
		t.Fatalf("oversized bodies enqueued %d tasks", len(ids))
	}
}

// edgeServer is a test server with a short body read deadline.
func edgeServer(t *testing.T) *testServer {
	s, _ := serverWith(t, t.TempDir(), tessera.NewManualClock(time.Now()), func(o *app.Options) {
		o.HTTP.BodyReadTimeout, o.HTTP.MinUploadRate = 300*time.Millisecond, 100<<10
	})
	return s
}

// dialHeld opens a connection and sends head; the test writes the body.
func dialHeld(t *testing.T, url, head string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	return c, bufio.NewReader(c)
}

// wantClosed fails unless the server closes c (read EOF or reset) before
// the test's own deadline on it.
func wantClosed(t *testing.T, br *bufio.Reader) {
	t.Helper()
	_, err := io.Copy(io.Discard, br)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the server held the connection open")
	}
}

func TestSlowBodiesAreCutOff(t *testing.T) {
	t.Parallel()
	s := edgeServer(t)
	head := "POST /v1/tasks HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + adminKey + "\r\nContent-Length: 1000\r\n\r\n"

	// A body that stops: 400 once the deadline passes, then the close.
	c, br := dialHeld(t, s.URL, head)
	if _, err := io.WriteString(c, `{"title":"st`); err != nil {
		t.Fatal(err)
	}
	e := wantError(t, readAnswer(t, br), 400, "invalid_request", "")
	if !strings.Contains(e.Error.Message, "too slowly") {
		t.Errorf("message %q", e.Error.Message)
	}
	wantClosed(t, br)

	// A route that needs no body answers at once, and the body it did not
	// need (one byte every 50 ms, the slow-loris pace) does not hold the
	// connection past the deadline.
	c, br = dialHeld(t, s.URL, "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				if _, err := c.Write([]byte("x")); err != nil {
					return
				}
			}
		}
	}()
	if r := readAnswer(t, br); r.Status != 200 {
		t.Fatalf("healthz with a trickling body: %d %s", r.Status, r.Body)
	}
	wantClosed(t, br)

	// Once the body is in, the handler has all the time it needs: a
	// long-poll longer than the deadline is not cut.
	key, _ := s.newKey("agent", "namespace:main", "claim")
	r := s.do("POST", "/v1/claims", key, map[string]any{"queue": "empty", "wait_seconds": 1})
	if r.Status != 204 {
		t.Fatalf("a 1 s long-poll under a 300 ms body deadline: %d %s", r.Status, r.Body)
	}
	if ids := s.listIDs("main", adminKey, ""); len(ids) != 0 {
		t.Fatalf("a cut-off body enqueued: %v", ids)
	}
}

// sendPaced writes body in 10 KiB pieces at rate bytes per second, on a
// schedule from the start, so a late wake-up is caught up.
func sendPaced(c net.Conn, body []byte, rate int) error {
	const piece = 10 << 10
	start := time.Now()
	for sent := 0; sent < len(body); {
		n := min(piece, len(body)-sent)
		if _, err := c.Write(body[sent : sent+n]); err != nil {
			return err
		}
		sent += n
		time.Sleep(time.Until(start.Add(time.Duration(sent) * time.Second / time.Duration(rate))))
	}
	return nil
}

// A blob upload may take as long as it needs while it keeps the minimum
// rate, and is cut off when it falls below it.
func TestUploadsKeepTheMinimumRate(t *testing.T) {
	s := edgeServer(t) // 300 ms, then 100 KiB/s
	data := bytes.Repeat([]byte("0123456789abcdef"), 400<<10/16)
	up := s.declare(201, "main", adminKey, data, nil)
	head := fmt.Sprintf("PUT /v1/blobs/uploads/%s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n", up.UploadID, adminKey, len(data))

	// 400 KiB at 400 KiB/s takes a second, three times the grace, yet
	// keeps well ahead of the rate.
	c, br := dialHeld(t, s.URL, head)
	if err := sendPaced(c, data, 400<<10); err != nil {
		t.Fatal(err)
	}
	r := readAnswer(t, br)
	if r.Status != 200 || !strings.Contains(string(r.Body), `"matches":true`) {
		t.Fatalf("a steady upload above the rate: %d %s", r.Status, r.Body)
	}

	// At 20 KiB/s it falls behind within half a second.
	c, br = dialHeld(t, s.URL, head)
	go func() { _ = sendPaced(c, data, 20<<10) }()
	wantError(t, readAnswer(t, br), 400, "invalid_request", "")
	wantClosed(t, br)
}
