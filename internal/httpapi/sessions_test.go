package httpapi_test

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"net/http"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/app"
	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// Anonymous demo sessions (SPEC §12, issue 10), through the real server.

// newSessionServer is a test server that believes X-Forwarded-For from
// the test client (127.0.0.1), so each test can speak from any address.
func newSessionServer(t testing.TB, dir string, clock *tessera.ManualClock, sessions core.SessionConfig) (*testServer, func()) {
	t.Helper()
	return serverWith(t, dir, clock, func(o *app.Options) {
		o.Core.Sessions = sessions
		o.HTTP.TrustProxy = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	})
}

func from(addr string) []string { return []string{"X-Forwarded-For", addr} }

// mint starts a session from addr and returns it.
func (s *testServer) mint(addr string) core.Session {
	s.t.Helper()
	var sess core.Session
	s.must(201, "POST", "/v1/sessions", "", nil, from(addr)...).decode(s.t, &sess)
	return sess
}

// A newcomer's whole practice: mint, the first call makes the practice
// tasks, and each brief's own instructions carry the session through
// claim → heartbeat → record → blob → submit.
func TestSessionPracticeLifecycle(t *testing.T) {
	s, _ := newSessionServer(t, t.TempDir(), tessera.NewManualClock(time.Now()), core.DefaultSessionConfig())
	sess := s.mint("198.51.100.7")
	if sess.Key == "" || !regexp.MustCompile(`^demo-[0-9a-z]{26}$`).MatchString(sess.Namespace) {
		t.Fatalf("session: %+v", sess)
	}
	if sess.Limits.RequestsLeft != 2000 || sess.Limits.ByteLimit != 64<<10 || !sess.ExpiresAt.After(s.Clock.Now().Add(23*time.Hour)) {
		t.Errorf("limits and expiry: %+v", sess)
	}
	if len(sess.NextSteps) != 2 || !strings.Contains(sess.NextSteps[0].Curl, sess.Key) ||
		!strings.Contains(sess.NextSteps[0].Curl, "/ns/"+sess.Namespace+"/v1/claims") || sess.NextSteps[1].MCP.Name != "claim_task" {
		t.Errorf("next steps: %+v", sess.NextSteps)
	}
	// Minting made no namespace.
	for _, ns := range s.namespaces() {
		if ns == sess.Namespace {
			t.Fatalf("minting made the demo namespace")
		}
	}
	ns, key := sess.Namespace, sess.Key

	// Task 1/3: claim, heartbeat, submit, as its brief says.
	c := s.claim(ns, key, core.PracticeQueue)
	if !strings.HasPrefix(c.Task.Title, "1/3") || !strings.Contains(c.Task.Brief, "/ns/"+ns+"/v1/claims/"+c.Task.ID+"/heartbeat") {
		t.Fatalf("first practice task: %q %q", c.Task.Title, c.Task.Brief)
	}
	s.must(200, "POST", nsPath(ns, "/v1/claims/"+c.Task.ID+"/heartbeat"), key, map[string]any{"lease_token": c.Lease.Token, "progress": map[string]any{"step": 1}})
	s.must(200, "POST", nsPath(ns, "/v1/claims/"+c.Task.ID+"/submit"), key,
		map[string]any{"lease_token": c.Lease.Token, "outcome": "succeeded", "result": map[string]any{"hello": "world"}})

	// Task 2/3: a record under the lease, read back naming the run.
	c = s.claim(ns, key, core.PracticeQueue)
	if !strings.HasPrefix(c.Task.Title, "2/3") || !strings.Contains(c.Task.Brief, "/ns/"+ns+"/v1/records/practice/notes") {
		t.Fatalf("second practice task: %q %q", c.Task.Title, c.Task.Brief)
	}
	s.must(201, "PUT", nsPath(ns, "/v1/records/practice/notes"), key, map[string]any{"value": map[string]any{"learned": "records"}, "lease_token": c.Lease.Token})
	var rec tessera.Record
	s.must(200, "GET", nsPath(ns, "/v1/records/practice/notes"), key, nil).decode(t, &rec)
	if rec.RunID != c.Lease.RunID {
		t.Errorf("the record names run %q, want %q", rec.RunID, c.Lease.RunID)
	}
	s.submit(ns, key, c, "succeeded")

	// Task 3/3: a blob in three calls, its ref in the result.
	c = s.claim(ns, key, core.PracticeQueue)
	if !strings.HasPrefix(c.Task.Title, "3/3") {
		t.Fatalf("third practice task: %q", c.Task.Title)
	}
	data := []byte("what I learned")
	sum := sha256.Sum256(data)
	m := s.uploadBlob(ns, key, data, map[string]any{"lease_token": c.Lease.Token, "content_type": "text/plain"})
	if m.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("blob: %+v", m)
	}
	s.must(200, "POST", nsPath(ns, "/v1/claims/"+c.Task.ID+"/submit"), key,
		map[string]any{"lease_token": c.Lease.Token, "outcome": "succeeded", "result": map[string]any{"ref": "sha256:" + m.SHA256}})
	s.emptyClaim(ns, key, core.PracticeQueue)

	// The session's trail and board are its own.
	var audit core.AuditPage
	s.must(200, "GET", "/v1/me/audit", key, nil).decode(t, &audit)
	if len(audit.Events) < 10 {
		t.Errorf("the session's own audit shows %d events", len(audit.Events))
	}
	for _, e := range audit.Events {
		if e.Namespace != ns {
			t.Errorf("a session event in %s: %+v", e.Namespace, e)
		}
	}
	var board core.Board
	s.must(200, "GET", nsPath(ns, "/board"), key, nil, "Accept", "application/json").decode(t, &board)
	if got := len(board.Tasks[tessera.StateSucceeded]); got != 3 {
		t.Errorf("the session's board shows %d succeeded tasks, want 3", got)
	}
}

// Minting writes only the principal, key, limit and audit rows: eight
// (the principal and its purge-index entry, the key and its index entry,
// the quota, the mint record, the global bucket, the event), and a session
// never used costs nothing more.
func TestSessionMintWritesOnlyItsRows(t *testing.T) {
	// The exact figures are the SQLite meter's (SPEC §14's table).
	sqliteOnly(t)
	s, _ := newSessionServer(t, t.TempDir(), tessera.NewManualClock(time.Now()), core.DefaultSessionConfig())
	s.mint("198.51.100.1") // the day's address salt is made once
	if w := s.rowsWritten(func() { s.mint("198.51.100.2") }); w != 8 {
		t.Errorf("a mint wrote %d rows, want 8", w)
	}
	s.Clock.Advance(time.Hour)
	if w := s.rowsWritten(func() {
		if err := s.Core.FlushCounters(t.Context(), true); err != nil {
			t.Error(err)
		}
	}); w != 0 {
		t.Errorf("an unused session wrote %d rows afterwards", w)
	}
}

// The per-address limit: 10 an hour per grouped address — IPv4 as is,
// IPv6 by /64, IPv4-mapped IPv6 as its IPv4 — with Retry-After until that
// address's next session is possible.
func TestSessionPerAddressLimit(t *testing.T) {
	clock := tessera.NewManualClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	s, _ := newSessionServer(t, t.TempDir(), clock, core.SessionConfig{PerAddress: 3, PerHour: 1000, Requests: 10})
	for _, group := range [][]string{
		{"203.0.113.9", "::ffff:203.0.113.9", "203.0.113.9"},           // IPv4, and the same as IPv4-mapped IPv6
		{"2001:db8:1:2::1", "2001:db8:1:2:ffff::9", "2001:db8:1:2::1"}, // one /64
	} {
		for _, addr := range group {
			s.mint(addr)
			clock.Advance(10 * time.Minute)
		}
		r := s.do("POST", "/v1/sessions", "", nil, from(group[0])...)
		wantError(t, r, 429, "rate_limited", "")
		// The oldest of the three was 30 minutes ago: the next in 30.
		if got := r.Header.Get("Retry-After"); got != strconv.Itoa(30*60) {
			t.Errorf("%s: Retry-After %q, want %d", group[0], got, 30*60)
		}
	}
	// Another /64, another IPv4: their own limits.
	s.mint("2001:db8:1:3::1")
	s.mint("203.0.113.10")
	// Once the oldest is an hour old, the address may mint again.
	clock.Advance(30 * time.Minute)
	s.mint("203.0.113.9")
	// Without a trusted proxy the socket's address is the client's: the
	// header is not believed.
	plain := newTestServer(t, func(c *core.Config) { c.Sessions.PerAddress = 1 })
	plain.must(201, "POST", "/v1/sessions", "", nil, from("192.0.2.1")...)
	wantError(t, plain.do("POST", "/v1/sessions", "", nil, from("192.0.2.2")...), 429, "rate_limited", "")
}

// The per-address limit holds when an address mints many sessions at
// once: of 40 simultaneous mints from one address, exactly the limit's 10
// succeed and the rest are 429 — on PostgreSQL too, whose writers run
// concurrently.
func TestSessionPerAddressLimitUnderConcurrentMints(t *testing.T) {
	s := newTestServer(t) // every request from 127.0.0.1; the default limit of 10
	const attempts = 40
	statuses := make(chan int, attempts)
	var wg sync.WaitGroup
	for range attempts {
		wg.Go(func() {
			r, err := s.send(http.DefaultClient, 30*time.Second, "POST", "/v1/sessions", "", nil)
			if err != nil {
				t.Error(err)
				return
			}
			statuses <- r.Status
		})
	}
	wg.Wait()
	close(statuses)
	got := map[int]int{}
	for status := range statuses {
		got[status]++
	}
	if want := (map[int]int{201: 10, 429: attempts - 10}); !maps.Equal(got, want) {
		t.Errorf("%d simultaneous mints from one address: %v, want %v", attempts, got, want)
	}
}

// The global allowance accrues evenly: a tenth at once, then one session
// per 3.6 s at 1,000 an hour; a refusal's Retry-After is when the next
// token arrives. The bucket lives in the store: a restart keeps it.
func TestSessionGlobalAllowance(t *testing.T) {
	dir := t.TempDir()
	clock := tessera.NewManualClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	cfg := core.SessionConfig{PerAddress: 1000, PerHour: 1000, Requests: 10}
	s, stop := newSessionServer(t, dir, clock, cfg)
	for i := range 100 {
		s.mint("10.0.0." + strconv.Itoa(i%250))
	}
	r := s.do("POST", "/v1/sessions", "", nil, from("10.1.0.1")...)
	wantError(t, r, 429, "rate_limited", "")
	if got := r.Header.Get("Retry-After"); got != "4" { // 3.6 s, rounded up
		t.Errorf("Retry-After %q, want 4 (the next token in 3.6 s, not the end of the hour)", got)
	}
	clock.Advance(3600 * time.Millisecond)
	s.mint("10.1.0.1")
	wantError(t, s.do("POST", "/v1/sessions", "", nil, from("10.1.0.2")...), 429, "rate_limited", "")

	stop()
	s, _ = newSessionServer(t, dir, clock, cfg)
	wantError(t, s.do("POST", "/v1/sessions", "", nil, from("10.1.0.2")...), 429, "rate_limited", "")
	clock.Advance(36 * time.Second) // ten more tokens
	for i := range 10 {
		s.mint("10.2.0." + strconv.Itoa(i))
	}
	wantError(t, s.do("POST", "/v1/sessions", "", nil, from("10.3.0.1")...), 429, "rate_limited", "")
}

// Each request of a session counts against its quota; past it, 429.
func TestSessionQuota(t *testing.T) {
	s, _ := newSessionServer(t, t.TempDir(), tessera.NewManualClock(time.Now()), core.SessionConfig{PerAddress: 10, PerHour: 1000, Requests: 3})
	sess := s.mint("198.51.100.3")
	for range 3 {
		s.must(200, "GET", "/v1/me", sess.Key, nil)
	}
	r := s.do("GET", "/v1/me", sess.Key, nil)
	wantError(t, r, 429, "rate_limited", "")
	if r.Header.Get("Retry-After") == "" {
		t.Error("a spent session's 429 has no Retry-After")
	}
}

// Session keys: 64 KiB per request, blob bytes included; no main, no
// other session's namespace, no admin route.
func TestSessionKeyLimits(t *testing.T) {
	s, _ := newSessionServer(t, t.TempDir(), tessera.NewManualClock(time.Now()), core.DefaultSessionConfig())
	a, b := s.mint("198.51.100.4"), s.mint("198.51.100.5")
	big := map[string]any{"title": "t", "payload": map[string]any{"s": strings.Repeat("x", 65<<10)}}
	wantError(t, s.do("POST", nsPath(a.Namespace, "/v1/tasks"), a.Key, big), 413, "payload_too_large", "")
	small := map[string]any{"title": "t", "payload": map[string]any{"s": strings.Repeat("x", 60<<10)}}
	s.must(201, "POST", nsPath(a.Namespace, "/v1/tasks"), a.Key, small)
	// A blob upload's bytes are held to the same limit, so a blob over it
	// is refused when declared, naming the limit: its bytes could never
	// be sent. One at the limit is declared with that limit and sent.
	e := wantError(t, s.do("POST", nsPath(a.Namespace, "/v1/blobs"), a.Key,
		map[string]any{"sha256": sum(make([]byte, 70_000)), "size": 70_000}), 413, "payload_too_large", "")
	if !strings.Contains(e.Error.Message, "65536") {
		t.Errorf("the refusal %q does not name the limit, 65536 bytes", e.Error.Message)
	}
	data := make([]byte, 64<<10)
	d := s.declare(201, a.Namespace, a.Key, data, nil)
	if d.MaxBytes != 64<<10 {
		t.Errorf("declared for a session key with max_bytes %d, want 65536", d.MaxBytes)
	}
	s.must(200, "PUT", nsPath(a.Namespace, "/v1/blobs/uploads/"+d.UploadID), a.Key, data)
	wantError(t, s.do("PUT", nsPath(a.Namespace, "/v1/blobs/uploads/"+d.UploadID), a.Key, append(data, 0)), 413, "payload_too_large", "")

	wantError(t, s.do("GET", "/v1/tasks", a.Key, nil), 403, "forbidden", "")
	wantError(t, s.do("GET", nsPath(b.Namespace, "/v1/tasks"), a.Key, nil), 403, "forbidden", "")
	wantError(t, s.do("GET", "/v1/admin/principals", a.Key, nil), 403, "forbidden", "")
	wantError(t, s.do("POST", "/v1/admin/keys", adminKey, map[string]any{"principal_id": a.Principal, "scopes": []string{"admin"}}), 409, "invalid_state", "")
}

// When a session's time is up, the purge removes its principal, key, quota
// and all of its namespace's data, blob bytes included.
func TestSessionPurge(t *testing.T) {
	s, _ := newSessionServer(t, t.TempDir(), tessera.NewManualClock(time.Now()), core.DefaultSessionConfig())
	sess := s.mint("198.51.100.6")
	kept := s.mint("198.51.100.8")
	c := s.claim(sess.Namespace, sess.Key, core.PracticeQueue)
	doomed := s.uploadBlob(sess.Namespace, sess.Key, []byte("doomed bytes"), map[string]any{"lease_token": c.Lease.Token})
	s.putRecord(201, sess.Namespace, sess.Key, "practice/notes", map[string]any{"value": 1})
	s.must(200, "GET", "/v1/me", kept.Key, nil)
	if !s.bytesHeld(t, sess.Namespace, doomed.SHA256) {
		t.Fatal("the session's bytes are not where the test looks")
	}

	s.Clock.Advance(core.SessionLifetime + time.Minute)
	if ran, err := s.Core.RunRetention(t.Context()); !ran || err != nil {
		t.Fatalf("retention: ran %v, %v", ran, err)
	}
	wantError(t, s.do("GET", "/v1/me", sess.Key, nil), 401, "unauthorized", "")
	for _, ns := range s.namespaces() {
		if strings.HasPrefix(ns, "demo-") {
			t.Errorf("namespace %s survived its session", ns)
		}
	}
	if s.bytesHeld(t, sess.Namespace, doomed.SHA256) {
		t.Error("the session's blob bytes survived it")
	}
	var ps struct {
		Principals []tessera.Principal `json:"principals"`
	}
	s.must(200, "GET", "/v1/admin/principals?limit=200", adminKey, nil).decode(t, &ps)
	for _, p := range ps.Principals {
		if p.Kind == tessera.KindAnonymous {
			t.Errorf("an expired session's principal survived: %+v", p)
		}
	}
}

// Discovery advertises the session endpoint and its limits.
func TestSessionsAdvertised(t *testing.T) {
	s := newTestServer(t, func(c *core.Config) { c.Sessions.PerAddress = 7 })
	var connect struct {
		Session struct {
			Available  bool   `json:"available"`
			Endpoint   string `json:"endpoint"`
			PerAddress int    `json:"sessions_per_address_hr"`
			BodyBytes  int    `json:"request_body_bytes"`
		} `json:"anonymous_session"`
	}
	s.must(200, "GET", "/connect.json", "", nil).decode(t, &connect)
	if !connect.Session.Available || connect.Session.Endpoint != "http://127.0.0.1:8787/v1/sessions" ||
		connect.Session.PerAddress != 7 || connect.Session.BodyBytes != 64<<10 {
		t.Errorf("connect.json anonymous_session: %+v", connect.Session)
	}
	for _, p := range []string{"/llms.txt", "/connect", "/"} {
		if b := s.must(200, "GET", p, "", nil).Body; !strings.Contains(string(b), "/v1/sessions") {
			t.Errorf("%s does not mention the session endpoint", p)
		}
	}
}

// A session key that calls without its namespace meets main, and the 403
// says which namespace it can use, over HTTP and over MCP alike.
func TestSessionForbiddenSaysWhereToGo(t *testing.T) {
	s, _ := newSessionServer(t, t.TempDir(), tessera.NewManualClock(time.Now()), core.DefaultSessionConfig())
	sess := s.mint("198.51.100.4")
	e := wantError(t, s.do("GET", "/v1/counts", sess.Key, nil), 403, "forbidden", "")
	if !strings.Contains(e.Error.Message, `namespace "`+sess.Namespace+`"`) || !strings.Contains(e.Error.Message, "/ns/"+sess.Namespace+"/") {
		t.Fatalf("403 over HTTP: %q", e.Error.Message)
	}
	r := s.do("POST", "/mcp", sess.Key, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": "counts", "arguments": map[string]any{}}})
	if !strings.Contains(string(r.Body), `can use namespace \"`+sess.Namespace+`\"`) {
		t.Fatalf("403 over MCP: %s", r.Body)
	}
}
