// Package httpapi is the HTTP/JSON adapter over the core: the route table,
// the edge checks of SPEC §4 (key, then namespace grant and action scope),
// request decoding with byte and shape limits, and the one mapping from
// error codes to HTTP statuses. It holds no SQL and no business rules.
package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/discovery"
	"github.com/tessera-dev/tessera/internal/mcp"
	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// MaxBodyBytes is the request body limit (SPEC §5).
const MaxBodyBytes = 1 << 20

// Server serves the HTTP API.
type Server struct {
	core *core.Service
	log  *slog.Logger
	mux  *http.ServeMux
	docs *discovery.Docs
	cfg  Config
	mcp  *mcp.Endpoint
	// metricsReg is what GET /metrics serves (metrics.go).
	metricsReg *serverMetrics
	// bodies are the request bodies being read (edge.go).
	bodies bodies
	// unavailable paces the warnings of storage faults.
	unavailable faultLog
	// patterns records every registered pattern, so a test can hold the
	// API description to all of them.
	patterns []string
}

func (s *Server) handle(pattern string, h http.Handler) {
	s.patterns = append(s.patterns, pattern)
	s.mux.Handle(pattern, h)
}

// Patterns returns every pattern the server registered.
func (s *Server) Patterns() []string { return s.patterns }

// Config is what the server tells the world about itself.
type Config struct {
	// PublicURL is the base URL clients reach the server at.
	PublicURL string
	Version   string
	// MetricsPublic serves GET /metrics without a key.
	MetricsPublic bool
	// TrustProxy are the networks of reverse proxies whose
	// X-Forwarded-For is believed (--trust-proxy); none by default.
	TrustProxy []netip.Prefix
	// BodyReadTimeout and MinUploadRate (bytes/s) make every request
	// body's read deadline (edge.go); zero takes the defaults.
	BodyReadTimeout time.Duration
	MinUploadRate   int64
	// MaxConns caps the open connections of Listener (0: no cap).
	MaxConns int
}

// New returns a Server over svc. The discovery documents are rendered here,
// once, from the same route table the handlers are registered from.
func New(svc *core.Service, log *slog.Logger, cfg Config) (*Server, error) {
	if cfg.BodyReadTimeout <= 0 {
		cfg.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if cfg.MinUploadRate <= 0 {
		cfg.MinUploadRate = DefaultMinUploadRate
	}
	s := &Server{core: svc, log: log, mux: http.NewServeMux(), cfg: cfg, metricsReg: newServerMetrics(svc)}
	for _, rt := range s.routes() {
		s.handle(rt.method+" /v1"+rt.path, s.handler(rt, false))
		s.handle(rt.method+" /ns/{namespace}/v1"+rt.path, s.handler(rt, true))
	}
	for _, rt := range s.publicRoutes() {
		s.handle(rt.method+" "+rt.path, s.handler(rt, false))
		s.handle(rt.method+" /ns/{namespace}"+rt.path, s.handler(rt, true))
	}
	s.mountMCP()
	docs, err := discovery.New(s.discoveryConfig(cfg), s.Describe(), ErrorBody{})
	if err != nil {
		return nil, err
	}
	s.docs = docs
	for _, p := range discovery.Paths {
		if p == "/" {
			p = "/{$}"
		}
		s.handle("GET "+p, docs.Handler())
	}
	s.handle("GET /metrics", http.HandlerFunc(s.metrics))
	// Minting a session takes no key and belongs to no namespace.
	s.handle("POST /v1/sessions", s.handler(s.sessionRoute(), false))
	s.mux.HandleFunc("/", s.noRoute)
	return s, nil
}

// methods are the methods a route may have, in the order Allow lists them.
var methods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// noRoute answers a request no pattern matched: 405 with Allow when the
// path is served under other methods, else 404.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range methods {
		probe := &http.Request{Method: m, URL: r.URL, Host: r.Host, Header: http.Header{}}
		if _, pattern := s.mux.Handler(probe); pattern != "/" && pattern != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeError(w, s.log, tessera.Errorf(tessera.CodeMethodNotAllowed, "%s does not answer %s; it answers %s", r.URL.Path, r.Method, strings.Join(allow, ", ")))
		return
	}
	writeError(w, s.log, tessera.Errorf(tessera.CodeNotFound, "no route %s %s", r.Method, r.URL.Path))
}

// route is one entry of the table every handler is registered from.
type route struct {
	method string
	path   string // below /v1
	// public routes need nothing on the main namespace when no key is
	// sent (no key or identity lookup at all); under /ns/{namespace}, or
	// with a key, they are checked like any other.
	public bool
	// op names the operation in audit events and counters, and is what
	// the edge checks a key against (core.NeedOf).
	op      string
	summary string
	handle  func(*call) error
	// in and out are zero values of the request body and the success
	// response, for the API description; nil means none.
	in, out any
	// noContent, when set, says why the route may also answer 204; also
	// lists other success statuses with the same body; html marks a route
	// that answers browsers with a page.
	noContent string
	also      []int
	html      bool
}

// call is one request on its way through a handler.
type call struct {
	w     http.ResponseWriter
	r     *http.Request
	ns    string
	actor *auth.Actor
	ctx   context.Context
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if c, ok := r.Context().Value(connKey{}).(*edgeConn); ok {
		c.responding.Store(true)
	}
	ctx, usage := meter.WithUsage(r.Context())
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	body := s.watchBody(rec, r)
	rec.body = body
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("panic", "route", rec.route, "panic", p)
			if !rec.wrote {
				writeError(rec, s.log, errors.New("panic"))
			}
		}
		s.metricsReg.observe(rec.route, rec.status, time.Since(start))
		s.log.Info("request", "method", r.Method, "route", rec.route, "status", rec.status,
			"duration_ms", time.Since(start).Milliseconds(),
			"rows_read", usage.Read.Load(), "rows_written", usage.Written.Load())
		// Whatever the answer did not read of the body is read now, so
		// the client gets to see the answer (edge.go).
		body.linger()
		s.forgetBody(body)
	}()
	if clean := canonicalPath(r.URL.Path); clean != r.URL.Path {
		// The mux would redirect, resending the key and the body to a
		// path the client did not write; a client that sends "//" or
		// ".." has a bug worth hearing about.
		writeError(rec, s.log, tessera.Invalid("path", "the path %q is not canonical; the canonical form is %q", r.URL.Path, clean))
		return
	}
	limit := s.bodyLimit(r) // records.go: blob uploads get the blob limit
	if r.ContentLength > limit {
		// Refuse before reading anything of the body (SPEC §5).
		writeError(rec, s.log, tessera.Errorf(tessera.CodePayloadTooLarge, "the request body is over %d bytes", limit))
		return
	}
	if body != nil {
		r.Body = http.MaxBytesReader(rec, body, limit)
	}
	if addr, ok := s.clientAddr(r); ok {
		ctx = core.WithClient(ctx, addr)
	}
	s.mux.ServeHTTP(rec, r.WithContext(ctx))
}

// canonicalPath is p without "." and ".." segments and repeated slashes,
// keeping a trailing slash: the form the mux routes.
func canonicalPath(p string) string {
	if p == "" || p[0] != '/' {
		return p
	}
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	return clean
}

func (s *Server) handler(rt route, namespaced bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if rec, ok := w.(*statusRecorder); ok {
			rec.route = rt.method + " " + rt.path
		}
		c := &call{w: w, r: r, ns: tessera.MainNamespace, ctx: r.Context()}
		err := s.serve(c, rt, namespaced)
		if err == nil {
			return
		}
		writeError(w, s.log, err)
		s.unavailable.note(s.log, err)
		// Every failure is counted, never evented (SPEC §9); a malformed
		// namespace is counted under main, since it names none.
		principal := ""
		if c.actor != nil {
			principal = c.actor.Principal.ID
		}
		if !tessera.ValidNamespace(c.ns) {
			c.ns = tessera.MainNamespace
		}
		s.core.Count(principal, c.ns, rt.op, string(tessera.ErrorCode(err)))
	}
}

func (s *Server) serve(c *call, rt route, namespaced bool) error {
	if namespaced {
		c.ns = c.r.PathValue("namespace")
		if !tessera.ValidNamespace(c.ns) {
			return tessera.Invalid("namespace", "namespace must match ^[a-z0-9][a-z0-9-]{0,62}$")
		}
	}
	if err := s.edge(c, rt); err != nil {
		return err
	}
	return rt.handle(c)
}

// edge is steps 1 and 2 of §4: a valid key, then the grant and scope the
// route's operation needs (the core's table, checked again by the core),
// all before any namespace work.
func (s *Server) edge(c *call, rt route) error {
	need := core.NeedOf(rt.op)
	if need.Keyless {
		return nil
	}
	if rt.public && c.r.Header.Get("Authorization") == "" && c.ns == tessera.MainNamespace {
		return nil
	}
	actor, err := s.authenticate(c.r)
	if err != nil {
		return err
	}
	c.actor = actor
	if err := need.Check(actor, c.ns); err != nil {
		return err
	}
	// A session key's requests are held to its smaller body limit, blob
	// bytes included (SPEC §5).
	if limit := core.BodyLimit(actor, s.bodyLimit(c.r)); limit < s.bodyLimit(c.r) {
		if c.r.ContentLength > limit {
			return tessera.Errorf(tessera.CodePayloadTooLarge, "a demo session's request body is at most %d bytes", limit)
		}
		c.r.Body = http.MaxBytesReader(c.w, c.r.Body, limit)
	}
	return nil
}

// clientAddr is the address a request came from: the socket's peer, or,
// when that peer is a trusted proxy, the first address of X-Forwarded-For
// from the right that is not one (each proxy appends the address it got
// the request from, so the rightmost untrusted entry is the one no client
// could forge). The audit trail's ip_hash and the per-address session
// limit both use it.
func (s *Server) clientAddr(r *http.Request) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}, false
	}
	addr := ap.Addr().Unmap()
	if !s.trusted(addr) {
		return addr, true
	}
	hops := r.Header.Values("X-Forwarded-For")
	for i := len(hops) - 1; i >= 0; i-- {
		parts := strings.Split(hops[i], ",")
		for j := len(parts) - 1; j >= 0; j-- {
			hop, err := netip.ParseAddr(strings.TrimSpace(parts[j]))
			if err != nil {
				return addr, true // a malformed hop: trust nothing past it
			}
			if addr = hop.Unmap(); !s.trusted(addr) {
				return addr, true
			}
		}
	}
	return addr, true
}

func (s *Server) trusted(a netip.Addr) bool {
	for _, p := range s.cfg.TrustProxy {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// authenticate is step 1 of §4: the bearer key of r, resolved, and a
// session key's request counted against its quota (core.Authenticate).
func (s *Server) authenticate(r *http.Request) (*auth.Actor, error) {
	// The scheme is case-insensitive (RFC 7235 §2.1): "bearer" is Bearer.
	scheme, bearer, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return nil, tessera.ErrUnauthorized
	}
	return s.core.Authenticate(r.Context(), strings.TrimSpace(bearer))
}

// faultLog warns of answers 503 unavailable caused by a fault underneath
// (a full disk, an I/O error): the operator must hear of it, but at most
// every 10 s, or a full disk would fill the log as fast as requests come.
type faultLog struct {
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func (f *faultLog) note(log *slog.Logger, err error) {
	// A fault underneath is a store error translated to unavailable with
	// its cause behind it, or a filesystem error.
	var e *tessera.Error
	if errors.As(err, &e) {
		if e.Code != tessera.CodeUnavailable || error(e) == err {
			return
		}
	} else if diskFault(err) == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if time.Since(f.last) < 10*time.Second {
		f.suppressed++
		return
	}
	log.Warn("storage unavailable: answering 503", "err", err, "unlogged_since_last", f.suppressed)
	f.last, f.suppressed = time.Now(), 0
}

type statusRecorder struct {
	http.ResponseWriter
	route  string
	status int
	wrote  bool
	body   *bodyWatch
}

func (r *statusRecorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
		// linger closes the connection under a body it will not read
		// (cut off, or never sent for want of "100 Continue"). net/http
		// cannot tell, since the edge replaced the body, and would
		// promise keep-alive: the client's next request on the
		// connection would meet EOF.
		if r.body.closesConn() {
			r.Header().Set("Connection", "close")
		}
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if !r.wrote {
		r.WriteHeader(http.StatusOK)
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
