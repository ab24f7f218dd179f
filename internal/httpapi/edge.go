package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/ops"
	"github.com/tessera-dev/tessera/internal/telemetry"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// What one client may hold of the process (SPEC §5: every body has a read
// deadline; an oversized body is answered 413 and then drained, not reset).
const (
	// MaxHeaderBytes bounds a request's header block; beyond it the
	// answer is 431.
	MaxHeaderBytes = 64 << 10
	// DefaultBodyReadTimeout and DefaultMinUploadRate make the body read
	// deadline: a body must be in within the timeout plus one second per
	// DefaultMinUploadRate bytes received. A stalled body is cut off after
	// 10 s; a 1 MiB JSON body may take 26 s, a 32 MiB blob 522 s.
	DefaultBodyReadTimeout = 10 * time.Second
	DefaultMinUploadRate   = 64 << 10
	// lingerBytes bounds the reading and discarding of a body the server
	// answered without reading (413 above all), as the body read timeout
	// bounds its time: enough for a client that writes its whole body
	// before it reads the answer (Python's urllib, Go's net/http) to get
	// past its write and see the answer, never an unbounded sink.
	lingerBytes = 64 << 20
	// drainStall is how long a body read may wait for its next bytes once
	// the server is draining: a healthy upload goes on, a stalled one is
	// cut off so the drain ends in time.
	drainStall = time.Second
	// refusalTime bounds the answer to a connection refused (over the
	// cap, or over its address's share), and maxRefusing the refusals
	// under way at once of each kind; past that a refused connection is
	// closed without an answer.
	refusalTime = time.Second
	maxRefusing = 128
	// closeWait is how long a connection closed under an unread body
	// keeps reading after its answer, so the answer is not reset away.
	closeWait = 500 * time.Millisecond
)

// HTTPServer returns the http.Server to serve s with: header limits, idle
// timeouts and the connection hooks the edge needs. Serve it on a listener
// from Listener.
func (s *Server) HTTPServer() *http.Server {
	var h http.Handler = s
	if telemetry.On() {
		// A span per request, by OpenTelemetry's own HTTP instrumentation
		// (its semantic conventions; named by the route's pattern once the
		// mux matched it), only when spans are exported: off, a request
		// pays nothing for it. It builds its attributes before the SDK's
		// sampler decides, so the decision is made first, and a request
		// not sampled skips it.
		traced := otelhttp.NewHandler(s, "tessera")
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, sampled := telemetry.Sample(r.Context(), r.Header)
			if sampled {
				traced.ServeHTTP(w, r.WithContext(ctx))
				return
			}
			s.ServeHTTP(w, r.WithContext(ctx))
		})
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    MaxHeaderBytes,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
		ConnState: func(c net.Conn, st http.ConnState) {
			if ec, ok := c.(*edgeConn); ok {
				ec.setState(st)
			}
		},
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}

type connKey struct{}

// Drain cuts off request bodies that stall: from now on a body read that
// waits more than drainStall for its next bytes fails, so a graceful
// shutdown is not held up by clients that send nothing.
func (s *Server) Drain() {
	s.bodies.mu.Lock()
	defer s.bodies.mu.Unlock()
	s.bodies.draining = true
	for b := range s.bodies.open {
		b.drain()
	}
}

// bodies is the registry of request bodies being read, for Drain.
type bodies struct {
	mu       sync.Mutex
	draining bool
	open     map[*bodyWatch]struct{}
}

// bodyWatch is a request body under its read deadline: start + timeout +
// one second per rate bytes received, moved forward as bytes arrive.
type bodyWatch struct {
	raw   io.ReadCloser
	rc    *http.ResponseController
	start time.Time
	cfg   Config
	// expectContinue marks a request that waits for "100 Continue" before
	// it sends its body; the server sends it only when the body is read.
	expectContinue bool

	mu       sync.Mutex
	n        int64
	eof      bool
	draining bool
	// cut is set once a read missed the deadline, lingering while the
	// edge discards the rest of the body.
	cut, lingering bool
	deadline       time.Time
}

// watchBody puts r's body under its read deadline; nil when r has none.
func (s *Server) watchBody(w http.ResponseWriter, r *http.Request) *bodyWatch {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	b := &bodyWatch{raw: r.Body, rc: http.NewResponseController(w), start: time.Now(), cfg: s.cfg,
		expectContinue: strings.EqualFold(r.Header.Get("Expect"), "100-continue")}
	// The edge reads what is left of a body itself (linger), bounded, so
	// net/http must not: by default it reads up to 256 KiB of it before
	// writing any answer, with no deadline of its own.
	_ = b.rc.EnableFullDuplex()
	s.bodies.mu.Lock()
	if s.bodies.open == nil {
		s.bodies.open = map[*bodyWatch]struct{}{}
	}
	s.bodies.open[b] = struct{}{}
	b.draining = s.bodies.draining
	s.bodies.mu.Unlock()
	b.mu.Lock()
	b.setDeadline(b.next(b.start))
	b.mu.Unlock()
	return b
}

// done forgets the body: its request is answered.
func (s *Server) forgetBody(b *bodyWatch) {
	if b == nil {
		return
	}
	s.bodies.mu.Lock()
	delete(s.bodies.open, b)
	s.bodies.mu.Unlock()
}

func (b *bodyWatch) Read(p []byte) (int, error) {
	n, err := b.raw.Read(p)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n += int64(n)
	switch {
	case err == io.EOF:
		// The whole body is in: the handler may now run as long as it
		// needs (a long-poll), with no deadline on the connection.
		b.eof = true
		b.setDeadline(time.Time{})
	case errors.Is(err, os.ErrDeadlineExceeded) && !b.lingering:
		b.cut = true
		return n, b.cutOff()
	case err == nil && n > 0 && !b.lingering:
		b.setDeadline(b.next(time.Now()))
	}
	return n, err
}

func (b *bodyWatch) Close() error { return b.raw.Close() }

// next is the deadline after the bytes received so far. b.mu held.
func (b *bodyWatch) next(now time.Time) time.Time {
	d := b.start.Add(b.cfg.BodyReadTimeout + time.Duration(float64(b.n)/float64(b.cfg.MinUploadRate)*float64(time.Second)))
	if b.draining {
		d = minTime(d, now.Add(drainStall))
	}
	return d
}

func (b *bodyWatch) setDeadline(t time.Time) {
	b.deadline = t
	_ = b.rc.SetReadDeadline(t)
}

func (b *bodyWatch) drain() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.draining = true
	if !b.eof {
		b.setDeadline(minTime(b.deadline, time.Now().Add(drainStall)))
	}
}

// cutOff is the answer to a body that missed its deadline.
func (b *bodyWatch) cutOff() error {
	if b.draining {
		return &tessera.Error{Code: tessera.CodeUnavailable, RetryAfter: time.Second,
			Message: "the server is shutting down and the request body stalled; send it again"}
	}
	return tessera.Errorf(tessera.CodeInvalidRequest,
		"the request body arrived too slowly: it must be in within %s plus one second per %d bytes", b.cfg.BodyReadTimeout, b.cfg.MinUploadRate)
}

// linger reads and discards what is left of a body the answer did not
// need, within the body read timeout and lingerBytes, after sending the
// answer: a
// client that writes its whole body before it reads (most do) then sees
// the answer, where closing with unread bytes would make the kernel reset
// the connection under it. A body read to its end leaves the connection
// open for the next request; otherwise it is closed.
func (b *bodyWatch) linger() {
	if b == nil {
		return
	}
	b.mu.Lock()
	if b.eof {
		b.mu.Unlock()
		return
	}
	reading := !b.wontRead()
	if reading {
		stop := b.cfg.BodyReadTimeout
		if b.draining {
			stop = drainStall
		}
		b.lingering = true
		b.setDeadline(time.Now().Add(stop))
	}
	b.mu.Unlock()
	if b.rc.Flush() != nil {
		return
	}
	if reading {
		if _, err := io.CopyN(io.Discard, b, lingerBytes); err == io.EOF {
			return
		}
	}
	b.closeConn()
}

// wontRead reports whether linger will close the connection rather than
// read the rest of the body: a body cut off for its pace is not waited for
// again, and a client waiting for "100 Continue" never got it, so it sends
// nothing. b.mu held.
func (b *bodyWatch) wontRead() bool {
	return !b.eof && (b.cut || b.expectContinue && b.n == 0)
}

// closesConn reports whether the connection closes after the answer, for
// the answer to say so (Connection: close). b may be nil.
func (b *bodyWatch) closesConn() bool {
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.wontRead()
}

// closeConn closes the connection under a body left unread: first the
// sending side, so the client reads the answer to its end, then, after a
// short bounded read, the whole connection.
func (b *bodyWatch) closeConn() {
	c, _, err := b.rc.Hijack()
	if err != nil {
		return
	}
	defer c.Close()
	if tc, ok := c.(interface{ CloseWrite() error }); ok {
		_ = tc.CloseWrite()
	}
	_ = c.SetReadDeadline(time.Now().Add(closeWait))
	_, _ = io.CopyN(io.Discard, c, 64<<10)
}

func minTime(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

// Listener wraps ln with the edge's connection handling: at most
// cfg.MaxConns connections at once (0: no cap), reclaiming idle keep-alive
// connections first and answering 503 beyond; at most
// cfg.ConnsPerAddress unproven connections from one address group
// (edgelimit.go), answering 429 beyond; and the JSON error body on the
// errors net/http answers itself (431, malformed requests).
func (s *Server) Listener(ln net.Listener) net.Listener {
	l := &listener{Listener: ln, srv: s, perAddr: s.cfg.ConnsPerAddress,
		idle: [2]map[*edgeConn]struct{}{{}, {}}, unproven: map[netip.Addr]int{}}
	if s.cfg.MaxConns > 0 {
		l.slots = make(chan struct{}, s.cfg.MaxConns)
		l.busyAt = max(s.cfg.MaxConns*busyNum/busyDen, 1)
	}
	l.share = max(l.perAddr/busyShareDiv, 1)
	return l
}

type listener struct {
	net.Listener
	srv   *Server
	slots chan struct{} // one per open connection; nil: no cap
	// perAddr bounds the unproven connections of one address group (0:
	// no bound); once busyAt slots are taken, share does.
	perAddr, busyAt, share int

	mu sync.Mutex
	// idle holds the idle keep-alive connections, unproven ones [0]
	// apart from proven ones [1]: at the cap the unproven go first.
	idle [2]map[*edgeConn]struct{}
	// unproven counts, by address group, the open connections that are
	// not proven (edgeConn.proven), from peers that are not trusted
	// proxies; an address without any has no entry, so the map is
	// bounded by the open connections.
	unproven map[netip.Addr]int

	// refusing counts the refusals being answered, at the cap [0] and
	// per address [1]: a flood refused per address does not take the
	// answers of clients refused at the cap.
	refusing [2]atomic.Int32
}

func (l *listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ec := &edgeConn{Conn: c, l: l}
		why, e := l.admit(ec)
		if e == nil {
			return ec, nil
		}
		l.refuse(c, why, e)
	}
}

// admit takes c into the per-address count and a connection slot, or says
// why not. The per-address check comes first, so a flooding address is
// refused without closing anyone's idle connection to make room for it.
func (l *listener) admit(c *edgeConn) (int, *tessera.Error) {
	if g, ok := l.limitedPeer(c); ok {
		l.mu.Lock()
		n := l.unproven[g]
		busy := l.slots != nil && len(l.slots) >= l.busyAt
		if n >= l.perAddr || busy && n >= l.share {
			l.mu.Unlock()
			if n >= l.perAddr {
				return refusedConnsPerAddress, &tessera.Error{Code: tessera.CodeRateLimited, RetryAfter: time.Second,
					Message: fmt.Sprintf("this address already holds %d open connections that have not been used with a key; reuse them (keep-alive), or retry shortly", n)}
			}
			return refusedBusyShare, &tessera.Error{Code: tessera.CodeRateLimited, RetryAfter: time.Second,
				Message: fmt.Sprintf("the server is near its limit of %d open connections, and this address already holds %d that have not been used with a key; reuse them (keep-alive), or retry shortly", cap(l.slots), n)}
		}
		l.unproven[g] = n + 1
		c.group, c.counted = g, true
		l.mu.Unlock()
	}
	if !l.take() {
		l.mu.Lock()
		l.uncount(c)
		l.mu.Unlock()
		return refusedConnCap, &tessera.Error{Code: tessera.CodeUnavailable, RetryAfter: time.Second,
			Message: fmt.Sprintf("the server is at its limit of %d open connections; retry shortly", cap(l.slots))}
	}
	return 0, nil
}

// limitedPeer is the address group c counts against: its socket peer,
// unless the per-address bound is off or the peer is a trusted proxy,
// which carries many clients' connections (their requests are still
// limited per forwarded address, admitRequest).
func (l *listener) limitedPeer(c net.Conn) (netip.Addr, bool) {
	ta, ok := c.RemoteAddr().(*net.TCPAddr)
	if l.perAddr <= 0 || !ok {
		return netip.Addr{}, false
	}
	a := ta.AddrPort().Addr().Unmap()
	if l.srv.trusted(a) {
		return netip.Addr{}, false
	}
	return core.GroupAddr(a), true
}

// uncount takes c out of its address's count of unproven connections.
// l.mu held.
func (l *listener) uncount(c *edgeConn) {
	if !c.counted {
		return
	}
	c.counted = false
	if n := l.unproven[c.group] - 1; n > 0 {
		l.unproven[c.group] = n
	} else {
		delete(l.unproven, c.group)
	}
}

// take takes a connection slot, closing an idle keep-alive connection to
// free one when all are taken: an unproven one if there is any, so a
// flood's idle connections go before a worker's.
func (l *listener) take() bool {
	if l.slots == nil {
		return true
	}
	select {
	case l.slots <- struct{}{}:
		return true
	default:
	}
	l.mu.Lock()
	var victim *edgeConn
	for _, idle := range l.idle {
		for c := range idle {
			victim = c
			break
		}
		if victim != nil {
			break
		}
	}
	l.mu.Unlock()
	if victim == nil {
		return false
	}
	victim.Close()
	select {
	case l.slots <- struct{}{}:
		return true
	default:
		return false // another accept took it; rare, and refusing is fine
	}
}

// refuse answers a connection the edge will not serve with e and closes
// it. The answer is written, then the request read (bounded) so the close
// does not reset it away.
func (l *listener) refuse(c net.Conn, why int, e *tessera.Error) {
	if n, log := l.srv.edge.count(why); log {
		l.srv.log.Warn("connection refused", "reason", refusalNames[why], "max_connections", cap(l.slots),
			"max_connections_per_address", l.perAddr, "refused_total", n)
	}
	refusing := &l.refusing[0]
	if why != refusedConnCap {
		refusing = &l.refusing[1]
	}
	if refusing.Add(1) > maxRefusing {
		refusing.Add(-1)
		c.Close()
		return
	}
	go func() {
		defer refusing.Add(-1)
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(refusalTime))
		if _, err := c.Write(rawErrorResponse(ops.Status(e.Code), e)); err != nil {
			return
		}
		if tc, ok := c.(interface{ CloseWrite() error }); ok {
			_ = tc.CloseWrite()
		}
		_, _ = io.CopyN(io.Discard, c, 64<<10)
	}()
}

// edgeConn is one accepted connection.
type edgeConn struct {
	net.Conn
	l *listener
	// responding is set while a handler serves a request on the
	// connection; any response written outside one is net/http's own.
	responding atomic.Bool
	// proven is set once a request on the connection was authenticated
	// with a key other than an anonymous session's: the connection then
	// leaves its address's count (a pool of workers behind one NAT is
	// not held to a flood's limit) and is the last to be reclaimed. A
	// session key does not prove one, since anyone can mint sessions.
	proven atomic.Bool
	// group and counted are its place in listener.unproven (l.mu).
	group     netip.Addr
	counted   bool
	closeOnce sync.Once
}

func (c *edgeConn) setState(st http.ConnState) {
	c.l.mu.Lock()
	delete(c.l.idle[0], c)
	delete(c.l.idle[1], c)
	if st == http.StateIdle {
		c.l.idle[c.provenIndex()][c] = struct{}{}
	}
	c.l.mu.Unlock()
	if st == http.StateIdle {
		c.responding.Store(false)
	}
}

func (c *edgeConn) provenIndex() int {
	if c.proven.Load() {
		return 1
	}
	return 0
}

// prove marks the connection proven (a keyed request authenticated on it).
func (c *edgeConn) prove() {
	if !c.proven.CompareAndSwap(false, true) {
		return
	}
	c.l.mu.Lock()
	c.l.uncount(c)
	c.l.mu.Unlock()
}

func (c *edgeConn) Close() error {
	err := c.Conn.Close()
	c.closeOnce.Do(func() {
		c.l.mu.Lock()
		delete(c.l.idle[0], c)
		delete(c.l.idle[1], c)
		c.l.uncount(c)
		c.l.mu.Unlock()
		if c.l.slots != nil {
			<-c.l.slots
		}
	})
	return err
}

// Write gives net/http's own error answers — written straight to the
// connection, as text/plain, when a request cannot even be parsed (431
// for headers over MaxHeaderBytes, 400 for malformed requests) — the
// error body every answer carries.
func (c *edgeConn) Write(p []byte) (int, error) {
	if c.responding.Load() {
		return c.Conn.Write(p)
	}
	status, reason, ok := serverError(p)
	if !ok {
		return c.Conn.Write(p)
	}
	e := tessera.Errorf(tessera.CodeInvalidRequest, "the request is not valid HTTP/1.1 (%s)", reason)
	if status == http.StatusRequestHeaderFieldsTooLarge {
		e = tessera.Errorf(tessera.CodePayloadTooLarge, "the request headers are over %d bytes", MaxHeaderBytes)
	}
	if _, err := c.Conn.Write(rawErrorResponse(status, e)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// serverError parses a complete error response net/http wrote itself.
func serverError(p []byte) (status int, reason string, ok bool) {
	line, rest, found := bytes.Cut(p, []byte("\r\n"))
	if !found || !bytes.Contains(rest, []byte("\r\n\r\n")) {
		return 0, "", false
	}
	proto, after, _ := bytes.Cut(line, []byte(" "))
	code, text, _ := bytes.Cut(after, []byte(" "))
	status, err := strconv.Atoi(string(code))
	if !bytes.HasPrefix(proto, []byte("HTTP/1.")) || err != nil || status < 400 || status > 599 {
		return 0, "", false
	}
	return status, string(text), true
}

// rawErrorResponse is a whole HTTP/1.1 error answer with the error body,
// for the places that write to a connection rather than through net/http.
// The connection closes after it.
func rawErrorResponse(status int, e *tessera.Error) []byte {
	h := http.Header{}
	body, _ := json.Marshal(errorBody(h, e))
	body = append(body, '\n')
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Connection", "close")
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\n", status, http.StatusText(status))
	_ = h.Write(&b)
	b.WriteString("\r\n")
	b.Write(body)
	return b.Bytes()
}

// DefaultMaxConns sizes the connection cap to the open-file limit: each
// connection may hold a second file (a blob being read or received), and
// 256 stay for the store, the logs and refusals. Without a known limit it
// is 1024.
func DefaultMaxConns() int {
	n := fileLimit()
	if n == 0 {
		return 1024
	}
	if n > 1<<31 {
		n = 1 << 31
	}
	return max(int(n)-256, 32) / 2
}
