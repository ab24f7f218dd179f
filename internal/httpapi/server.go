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
	"strings"
	"time"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/discovery"
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
	// metricsReg is what GET /metrics serves (metrics.go).
	metricsReg *serverMetrics
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
}

// New returns a Server over svc. The discovery documents are rendered here,
// once, from the same route table the handlers are registered from.
func New(svc *core.Service, log *slog.Logger, cfg Config) (*Server, error) {
	s := &Server{core: svc, log: log, mux: http.NewServeMux(), cfg: cfg, metricsReg: newServerMetrics(svc)}
	for _, rt := range s.routes() {
		s.handle(rt.method+" /v1"+rt.path, s.handler(rt, false))
		s.handle(rt.method+" /ns/{namespace}/v1"+rt.path, s.handler(rt, true))
	}
	for _, rt := range s.publicRoutes() {
		s.handle(rt.method+" "+rt.path, s.handler(rt, false))
		s.handle(rt.method+" /ns/{namespace}"+rt.path, s.handler(rt, true))
	}
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
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, s.log, tessera.Errorf(tessera.CodeNotFound, "no route %s %s", r.Method, r.URL.Path))
	})
	return s, nil
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
	ctx, usage := meter.WithUsage(r.Context())
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
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
	}()
	limit := s.bodyLimit(r) // records.go: blob uploads get the blob limit
	if r.ContentLength > limit {
		// Refuse before reading anything of the body (SPEC §5).
		writeError(rec, s.log, tessera.Errorf(tessera.CodePayloadTooLarge, "the request body is over %d bytes", limit))
		return
	}
	r.Body = http.MaxBytesReader(rec, r.Body, limit)
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		ctx = core.WithClient(ctx, ap.Addr())
	}
	s.mux.ServeHTTP(rec, r.WithContext(ctx))
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
	header := c.r.Header.Get("Authorization")
	if rt.public && header == "" && c.ns == tessera.MainNamespace {
		return nil
	}
	// The scheme is case-insensitive (RFC 7235 §2.1): "bearer" is Bearer.
	scheme, bearer, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return tessera.ErrUnauthorized
	}
	actor, err := s.core.Auth().Authenticate(c.ctx, strings.TrimSpace(bearer))
	if err != nil {
		return err
	}
	c.actor = actor
	return core.NeedOf(rt.op).Check(actor, c.ns)
}

type statusRecorder struct {
	http.ResponseWriter
	route  string
	status int
	wrote  bool
}

func (r *statusRecorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
