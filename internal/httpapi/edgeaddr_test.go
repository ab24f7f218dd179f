package httpapi_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/app"
	"github.com/tessera-dev/tessera/internal/httpapi"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// The edge's per-address limits (issue 33): a keyless flood from a few
// addresses must not crowd out keyed traffic. Linux routes all of
// 127.0.0.0/8 to the loopback interface, so a test speaks from as many
// addresses as it likes by binding its end of the connection.

// limitedServer is a test server whose edge limits set configures.
func limitedServer(t *testing.T, set func(*httpapi.Config)) *testServer {
	t.Helper()
	s, _ := serverWith(t, t.TempDir(), tessera.NewManualClock(time.Now()), func(o *app.Options) { set(&o.HTTP) })
	return s
}

// dialFrom opens a connection to url from the loopback address src.
func dialFrom(url, src string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
	return d.Dial("tcp", strings.TrimPrefix(url, "http://"))
}

// heldConn is a connection the test drives by hand.
type heldConn struct {
	net.Conn
	br *bufio.Reader
}

func hold(t *testing.T, url, src string) *heldConn {
	t.Helper()
	c, err := dialFrom(url, src)
	if err != nil {
		t.Fatalf("dial from %s: %v (the tests need 127.0.0.0/8 on the loopback interface, as Linux has it)", src, err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	return &heldConn{Conn: c, br: bufio.NewReader(c)}
}

// get sends GET path on c, with key unless it is "", and reads the answer.
func (c *heldConn) get(t *testing.T, path, key string) *response {
	t.Helper()
	auth := ""
	if key != "" {
		auth = "Authorization: Bearer " + key + "\r\n"
	}
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n%s\r\n", path, auth); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return readAnswer(t, c.br)
}

// clientFrom is an HTTP client whose connections come from src.
func clientFrom(src string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
}

// wantRateLimited fails unless r is 429 rate_limited with a Retry-After
// of at least a second, in the header and the body, and its message says
// what was limited.
func wantRateLimited(t *testing.T, r *response, says string) {
	t.Helper()
	e := wantError(t, r, 429, "rate_limited", "")
	ra, err := strconv.Atoi(r.Header.Get("Retry-After"))
	if err != nil || ra < 1 || e.Error.Details["retry_after"] != float64(ra) {
		t.Fatalf("Retry-After %q, details %v", r.Header.Get("Retry-After"), e.Error.Details)
	}
	if !strings.Contains(e.Error.Message, says) {
		t.Fatalf("message %q does not say %q", e.Error.Message, says)
	}
}

// Behind a trusted proxy the keyless rate is the forwarded client's, by
// its group (IPv6 by /64, IPv4-mapped as IPv4); an untrusted peer's
// X-Forwarded-For is its own claim and ignored. Keyed requests are never
// held behind keyless ones, but keys that are refused spend the address's
// allowance as keyless requests do.
func TestKeylessRatePerClientAddress(t *testing.T) {
	t.Parallel()
	s := limitedServer(t, func(c *httpapi.Config) {
		c.TrustProxy = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
		c.KeylessRate, c.KeylessBurst = 0.001, 2 // no refill within the test
	})
	keyless := func(addr string) *response { return s.do("GET", "/healthz", "", nil, from(addr)...) }
	const limited = "requests without a key are limited"

	for _, group := range [][]string{
		{"2001:db8:1:2::1", "2001:db8:1:2::1", "2001:db8:1:2:ffff::9"}, // one /64
		{"192.0.2.7", "192.0.2.7", "::ffff:192.0.2.7"},                 // IPv4, and as IPv4-mapped IPv6
	} {
		s.must(200, "GET", "/healthz", "", nil, from(group[0])...)
		s.must(200, "GET", "/healthz", "", nil, from(group[1])...)
		wantRateLimited(t, keyless(group[2]), limited)
		wantRateLimited(t, keyless(group[0]), limited)
		// Keyed requests from the drained address are served.
		s.must(200, "GET", "/v1/me", adminKey, nil, from(group[0])...)
	}
	s.must(200, "GET", "/healthz", "", nil, from("2001:db8:1:3::1")...) // the next /64 has its own
	s.must(200, "GET", "/healthz", "", nil, from("192.0.2.8")...)

	// Garbage where the key goes is no key: the request is keyless (and
	// refused for its garbage while it has tokens).
	for _, status := range []int{401, 401, 429} {
		s.must(status, "GET", "/healthz", "", nil, "X-Forwarded-For", "192.0.2.20", "Authorization", "Bearer nonsense")
	}

	// From an untrusted peer (127.0.0.2) the header names no one: its
	// requests spend the peer's own tokens, whatever client they claim.
	c := clientFrom("127.0.0.2")
	for i, want := range []int{200, 200, 429} {
		req, _ := http.NewRequest("GET", s.URL+"/healthz", nil)
		req.Header.Set("X-Forwarded-For", fmt.Sprintf("198.51.100.%d", i+1))
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != want {
			t.Fatalf("untrusted peer, request %d: %d, want %d", i+1, res.StatusCode, want)
		}
	}
	s.must(200, "GET", "/healthz", "", nil, from("198.51.100.3")...) // the real 198.51.100.3 is untouched

	// Well-formed keys that are refused (401) spend the address's tokens
	// after the fact; once they overdraw it, even a good key from there
	// waits (else any made-up key would walk around the limit, at a key
	// lookup each).
	const madeUp = "tsk_nosuchkey_abcdefghijklmnopqrstuvwxyz0123"
	for range 3 { // 2 tokens, then 0 is still not overdrawn
		wantError(t, s.do("GET", "/v1/me", madeUp, nil, from("203.0.113.9")...), 401, "unauthorized", "")
	}
	const refusedKeys = "carried keys that were refused"
	wantRateLimited(t, s.do("GET", "/v1/me", madeUp, nil, from("203.0.113.9")...), refusedKeys)
	wantRateLimited(t, s.do("GET", "/v1/me", adminKey, nil, from("203.0.113.9")...), refusedKeys)
	wantRateLimited(t, keyless("203.0.113.9"), limited)
	s.must(200, "GET", "/v1/me", adminKey, nil, from("203.0.113.10")...)
}

// wantRefusedConn fails unless a connection from src is answered 429 at
// once and closed: the address holds its share.
func wantRefusedConn(t *testing.T, url, src, says string) {
	t.Helper()
	c := hold(t, url, src)
	wantRateLimited(t, readAnswer(t, c.br), says)
	if _, err := c.br.ReadByte(); err != io.EOF {
		t.Fatalf("the refused connection from %s stayed open: %v", src, err)
	}
}

// served fails unless each of conns answers a keyless request: it was
// taken, not refused.
func served(t *testing.T, conns ...*heldConn) {
	t.Helper()
	for _, c := range conns {
		if r := c.get(t, "/healthz", ""); r.Status != 200 {
			t.Fatalf("a held connection from %s: %d %s", c.LocalAddr(), r.Status, r.Body)
		}
	}
}

// The per-address connection limit counts, by socket peer, the
// connections not yet used with a key: a connection a real key was used
// on leaves the count (workers behind one NAT are not held to a flood's
// limit), one used with a session key does not (anyone can mint those),
// and a trusted proxy, which carries everyone's connections, is exempt.
func TestConnectionsPerAddress(t *testing.T) {
	t.Parallel()
	s := limitedServer(t, func(c *httpapi.Config) {
		c.ConnsPerAddress = 2
		c.TrustProxy = []netip.Prefix{netip.MustParsePrefix("127.0.0.9/32")}
	})
	const over = "already holds 2 open connections"

	// Two silent connections fill 127.0.0.2's share; the third is refused,
	// and another address is not.
	a1, a2 := hold(t, s.URL, "127.0.0.2"), hold(t, s.URL, "127.0.0.2")
	wantRefusedConn(t, s.URL, "127.0.0.2", over)
	b := hold(t, s.URL, "127.0.0.3")
	served(t, a1, a2, b)
	// A connection closed gives its place back, once the server has
	// read the close.
	a1.Close()
	for try := 0; ; try++ {
		c := hold(t, s.URL, "127.0.0.2")
		if r := c.get(t, "/healthz", ""); r.Status == 200 {
			break
		} else if try == 50 || r.Status != 429 {
			t.Fatalf("after a close: %d %s", r.Status, r.Body)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// A connection used with a real key leaves the count: two more
	// silent ones fit beside it, and it goes on serving.
	k := hold(t, s.URL, "127.0.0.4")
	if r := k.get(t, "/v1/me", adminKey); r.Status != 200 {
		t.Fatalf("keyed: %d %s", r.Status, r.Body)
	}
	k1, k2 := hold(t, s.URL, "127.0.0.4"), hold(t, s.URL, "127.0.0.4")
	wantRefusedConn(t, s.URL, "127.0.0.4", over)
	served(t, k1, k2)
	if r := k.get(t, "/v1/me", adminKey); r.Status != 200 {
		t.Fatalf("keyed, again: %d %s", r.Status, r.Body)
	}

	// A session key proves nothing: its connection still counts.
	var sess struct {
		Key string `json:"key"`
	}
	s.must(201, "POST", "/v1/sessions", "", nil).decode(t, &sess)
	anon := hold(t, s.URL, "127.0.0.5")
	if r := anon.get(t, "/v1/me", sess.Key); r.Status != 200 {
		t.Fatalf("session key: %d %s", r.Status, r.Body)
	}
	anon2 := hold(t, s.URL, "127.0.0.5")
	wantRefusedConn(t, s.URL, "127.0.0.5", over)
	served(t, anon2)

	// The trusted proxy holds as many as it needs.
	var proxied []*heldConn
	for range 5 {
		proxied = append(proxied, hold(t, s.URL, "127.0.0.9"))
	}
	served(t, proxied...)
}

// Near the global cap (three quarters of it taken) a new connection is
// taken only from an address holding fewer than its share (an eighth of
// the per-address limit) of unproven connections, so the last quarter is
// left to addresses that hold few; at the cap itself an idle connection
// nobody used with a key is reclaimed before a worker's, and with none
// idle the answer is 503.
func TestConnectionsNearTheCap(t *testing.T) {
	t.Parallel()
	s := limitedServer(t, func(c *httpapi.Config) { c.MaxConns, c.ConnsPerAddress = 8, 16 }) // busy at 6; share 2
	var held []*heldConn
	for range 6 {
		held = append(held, hold(t, s.URL, "127.0.0.2"))
	}
	wantRefusedConn(t, s.URL, "127.0.0.2", "near its limit of 8 open connections")
	held = append(held, hold(t, s.URL, "127.0.0.3"), hold(t, s.URL, "127.0.0.3"))
	wantRefusedConn(t, s.URL, "127.0.0.3", "near its limit of 8 open connections")
	// All 8 are taken and none is idle: a newcomer gets 503.
	c := hold(t, s.URL, "127.0.0.4")
	wantError(t, readAnswer(t, c.br), 503, "unavailable", "")
	served(t, held...)
}

// At the cap, idle connections that were never used with a real key are
// reclaimed first: three workers' idle connections survive a newcomer,
// the one keyless idle connection does not.
func TestIdleKeylessConnectionsAreReclaimedFirst(t *testing.T) {
	t.Parallel()
	s := limitedServer(t, func(c *httpapi.Config) { c.MaxConns = 5 })
	var workers []*heldConn
	for range 3 {
		w := hold(t, s.URL, "127.0.0.2")
		if r := w.get(t, "/v1/me", adminKey); r.Status != 200 {
			t.Fatalf("keyed: %d %s", r.Status, r.Body)
		}
		workers = append(workers, w)
	}
	keyless := hold(t, s.URL, "127.0.0.3")
	served(t, keyless)
	hold(t, s.URL, "127.0.0.4") // silent: not idle, never reclaimed
	// The server marks a connection idle just after its answer.
	time.Sleep(100 * time.Millisecond)
	newcomer := hold(t, s.URL, "127.0.0.5")
	served(t, newcomer)
	if _, err := keyless.br.ReadByte(); err != io.EOF {
		t.Fatalf("the keyless idle connection was not the one closed: %v", err)
	}
	for _, w := range workers {
		if r := w.get(t, "/v1/me", adminKey); r.Status != 200 {
			t.Fatalf("a worker's connection after the reclaim: %d %s", r.Status, r.Body)
		}
	}
}
