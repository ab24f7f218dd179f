// Package httpapi is the HTTP/JSON adapter over the core: the route table,
// the edge checks of SPEC §4 (key, then namespace grant and action scope),
// request decoding with byte and shape limits, and the one mapping from
// error codes to HTTP statuses. It holds no SQL and no business rules.
package httpapi

import (
	"log/slog"
	"net/http"
	"net/netip"
	"path"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/discovery"
	"github.com/tessera-dev/tessera/internal/input"
	"github.com/tessera-dev/tessera/internal/mcp"
	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/ops"
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
	// keyless is the per-address rate of requests without a key, nil
	// when off; edge counts what the edge refused (edgelimit.go).
	keyless *addrBuckets
	edge    edgeCounts
	// exec runs every operation (package ops).
	exec *ops.Exec
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
	// ConnsPerAddress caps the open connections of Listener from one
	// address group that have not been used with a key (0: no cap);
	// trusted proxies are exempt (edgelimit.go).
	ConnsPerAddress int
	// KeylessRate (a second) and KeylessBurst bound the requests without
	// a key from one client address group (0: no bound).
	KeylessRate  float64
	KeylessBurst int
	// MCPBatchWait is the long-poll time the calls of one MCP request
	// share (0: mcp.DefaultBatchWait).
	MCPBatchWait time.Duration
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
	s := &Server{core: svc, log: log, mux: http.NewServeMux(), cfg: cfg,
		exec: ops.New(svc, log, strings.TrimRight(cfg.PublicURL, "/"))}
	s.metricsReg = newServerMetrics(svc, s.exec)
	s.metricsReg.registry.MustRegister(&s.edge)
	if cfg.KeylessRate > 0 {
		s.keyless = newAddrBuckets(cfg.KeylessRate, max(cfg.KeylessBurst, 1))
	}
	s.registerOps()
	s.mountMCP()
	s.mountConsole()
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
		writeError(w, tessera.Errorf(tessera.CodeMethodNotAllowed, "%s does not answer %s; it answers %s", input.Clip(r.URL.Path), r.Method, strings.Join(allow, ", ")))
		return
	}
	writeError(w, tessera.Errorf(tessera.CodeNotFound, "no route %s %s", input.Clip(r.Method), input.Clip(r.URL.Path)))
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
	// The per-address limits come before anything else reads the request
	// (edgelimit.go).
	edge, refused := s.admitRequest(r)
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("panic", "route", rec.route, "panic", p)
			if !rec.wrote {
				writeError(rec, tessera.Errorf(tessera.CodeInternal, "internal error"))
			}
		}
		// A refusal at the edge is counted there, not logged one by one:
		// a flood must not become a flood of log lines.
		if span := trace.SpanFromContext(r.Context()); rec.route != "" && span.IsRecording() {
			// The HTTP instrumentation names a span by the mux's pattern,
			// which only this server's copy of the request holds: the
			// route's template is named here.
			span.SetName(rec.route)
			_, path, _ := strings.Cut(rec.route, " ")
			span.SetAttributes(attribute.String("http.route", path))
		}
		if refused == nil {
			s.metricsReg.observe(rec.route, rec.status, time.Since(start))
			if !rec.op {
				s.log.Info("request", "method", r.Method, "route", rec.route, "status", rec.status,
					"duration_ms", time.Since(start).Milliseconds(),
					"rows_read", usage.Read.Load(), "rows_written", usage.Written.Load())
			}
		}
		s.answered(edge, rec.status)
		// Whatever the answer did not read of the body is read now, so
		// the client gets to see the answer (edge.go).
		body.linger()
		s.forgetBody(body)
	}()
	if refused != nil {
		writeError(rec, refused)
		return
	}
	if clean := canonicalPath(r.URL.Path); clean != r.URL.Path {
		// The mux would redirect, resending the key and the body to a
		// path the client did not write; a client that sends "//" or
		// ".." has a bug worth hearing about.
		writeError(rec, tessera.Invalid("path", "the path %q is not canonical; the canonical form is %q", input.Clip(r.URL.Path), input.Clip(clean)))
		return
	}
	limit := s.bodyLimit(r) // records.go: blob uploads get the blob limit
	if r.ContentLength > limit {
		// Refuse before reading anything of the body (SPEC §5).
		writeError(rec, tessera.Errorf(tessera.CodePayloadTooLarge, "the request body is over %d bytes", limit))
		return
	}
	if body != nil {
		r.Body = http.MaxBytesReader(rec, body, limit)
	}
	if edge.addr.IsValid() {
		ctx = core.WithClient(ctx, edge.addr)
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

// authenticate is step 1 of §4: the bearer key of r, resolved. A session
// key's quota is spent per operation (ops.Exec.Do), not here.
func (s *Server) authenticate(r *http.Request) (*auth.Actor, error) {
	bearer, err := auth.Bearer(r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"))
	if err != nil {
		return nil, err
	}
	a, err := s.core.Auth().Authenticate(r.Context(), bearer)
	if c, ok := r.Context().Value(connKey{}).(*edgeConn); ok && err == nil && a.Principal.Kind != tessera.KindAnonymous {
		c.prove() // the connection's address limit no longer holds it (edge.go)
	}
	return a, err
}

type statusRecorder struct {
	http.ResponseWriter
	route string
	// op is set when an operation answered: it logged the call itself.
	op     bool
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
