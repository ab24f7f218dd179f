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
	"strings"
	"time"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/core"
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
}

// New returns a Server over svc.
func New(svc *core.Service, log *slog.Logger) *Server {
	s := &Server{core: svc, log: log, mux: http.NewServeMux()}
	for _, rt := range s.routes() {
		s.mux.HandleFunc(rt.method+" /v1"+rt.path, s.handler(rt, false))
		s.mux.HandleFunc(rt.method+" /ns/{namespace}/v1"+rt.path, s.handler(rt, true))
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, s.log, tessera.Errorf(tessera.CodeNotFound, "no route %s %s", r.Method, r.URL.Path))
	})
	return s
}

// access says what the edge demands before a handler runs.
type access int

const (
	// anyKey needs a valid key and nothing more.
	anyKey access = iota
	// granted needs a key with a grant for the namespace and, when the
	// route names one, the action scope.
	granted
	// adminOnly needs the admin scope.
	adminOnly
)

// route is one entry of the table every handler is registered from.
type route struct {
	method  string
	path    string // below /v1
	access  access
	action  tessera.Action
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
		s.log.Info("request", "method", r.Method, "route", rec.route, "status", rec.status,
			"duration_ms", time.Since(start).Milliseconds(),
			"rows_read", usage.Read.Load(), "rows_written", usage.Written.Load())
	}()
	if r.ContentLength > MaxBodyBytes {
		// Refuse before reading anything of the body (SPEC §5).
		writeError(rec, s.log, tooLarge())
		return
	}
	r.Body = http.MaxBytesReader(rec, r.Body, MaxBodyBytes)
	s.mux.ServeHTTP(rec, r.WithContext(ctx))
}

func (s *Server) handler(rt route, namespaced bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if rec, ok := w.(*statusRecorder); ok {
			rec.route = rt.method + " " + rt.path
		}
		c := &call{w: w, r: r, ns: tessera.MainNamespace, ctx: r.Context()}
		if namespaced {
			c.ns = r.PathValue("namespace")
			if !tessera.ValidNamespace(c.ns) {
				writeError(w, s.log, tessera.Invalid("namespace", "namespace must match ^[a-z0-9][a-z0-9-]{0,62}$"))
				return
			}
		}
		if err := s.edge(c, rt); err != nil {
			writeError(w, s.log, err)
			return
		}
		if err := rt.handle(c); err != nil {
			writeError(w, s.log, err)
		}
	}
}

// edge is steps 1 and 2 of §4: a valid key, then the grant and scope, all
// before any namespace work.
func (s *Server) edge(c *call, rt route) error {
	bearer, ok := strings.CutPrefix(c.r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return tessera.ErrUnauthorized
	}
	actor, err := s.core.Auth().Authenticate(c.ctx, strings.TrimSpace(bearer))
	if err != nil {
		return err
	}
	c.actor = actor
	switch rt.access {
	case granted:
		return actor.Check(c.ns, rt.action)
	case adminOnly:
		return actor.Check(c.ns, tessera.ActionAdmin)
	}
	return nil
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
