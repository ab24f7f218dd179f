package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// publicRoutes are the public-state routes of SPEC §3.2. Their path is
// absolute (not below /v1); each also exists under /ns/{namespace}, where
// it needs a key with a grant for that namespace.
func (s *Server) publicRoutes() []route {
	return []route{
		{method: "GET", path: "/healthz", public: true, op: core.ActHealth, summary: "Liveness, from the health snapshot; 503 when it cannot be built", handle: s.healthz, out: healthzResponse{}},
		{method: "GET", path: "/v1/health", public: true, op: core.ActHealth, summary: "Public tasks by queue and state, leases live and expired, oldest ready age", handle: s.health, out: core.Health{}},
		{method: "GET", path: "/board", public: true, op: core.ActBoard, summary: "Public tasks by state and public record heads: HTML for browsers, JSON for Accept: application/json", handle: s.board, out: core.Board{}, html: true},
		{method: "GET", path: "/v1/public/activity", public: true, op: core.ActActivity, summary: "Public events of the last 24 h, newest first, redacted", handle: s.activity, in: activityQuery{}, out: core.ActivityPage{}},
	}
}

type healthzResponse struct {
	Status string    `json:"status"`
	Time   time.Time `json:"time"`
}

type activityQuery struct {
	Cursor string `query:"cursor" doc:"next_cursor of the previous page"`
	Limit  int    `query:"limit" doc:"1–200, default 50"`
}

func (s *Server) healthz(c *call) error {
	h, err := s.core.Health(c.ctx, c.actor, c.ns)
	if err != nil {
		return s.publicError(err)
	}
	c.publicHeaders()
	return c.json(http.StatusOK, healthzResponse{Status: h.Status, Time: h.Time})
}

func (s *Server) health(c *call) error {
	h, err := s.core.Health(c.ctx, c.actor, c.ns)
	if err != nil {
		return s.publicError(err)
	}
	c.publicHeaders()
	return c.json(http.StatusOK, h)
}

func (s *Server) board(c *call) error {
	b, err := s.core.Board(c.ctx, c.actor, c.ns)
	if err != nil {
		return s.publicError(err)
	}
	c.publicHeaders()
	c.w.Header().Set("Vary", "Accept")
	if wantsJSON(c.r.Header.Get("Accept")) {
		return c.json(http.StatusOK, b)
	}
	return s.writeBoardPage(c, b)
}

func (s *Server) activity(c *call) error {
	cursor, err := c.query("cursor")
	if err != nil {
		return err
	}
	limit, err := c.queryInt("limit", 1, core.MaxListLimit)
	if err != nil {
		return err
	}
	page, err := s.core.Activity(c.ctx, c.actor, c.ns, cursor, int(limit))
	if err != nil {
		return s.publicError(err)
	}
	c.publicHeaders()
	return c.json(http.StatusOK, page)
}

// publicHeaders: the answer is as fresh as its snapshot, which any state
// change drops, so caches must ask again; under a key it is private.
func (c *call) publicHeaders() {
	cc := "no-cache"
	if c.actor != nil {
		cc = "private, no-cache"
	}
	c.w.Header().Set("Cache-Control", cc)
}

// publicError keeps the API's own errors (a bad key, a missing grant, a
// bad cursor, a refused audit write) and turns a storage fault into 503
// unavailable: the snapshot cannot be built (SPEC §3.2).
func (s *Server) publicError(err error) error {
	var e *tessera.Error
	if errors.As(err, &e) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	s.log.Error("public state snapshot", "err", err)
	return tessera.Errorf(tessera.CodeUnavailable, "the public state cannot be read right now")
}

// wantsJSON reports whether a client asked for JSON rather than a page.
func wantsJSON(accept string) bool {
	return strings.Contains(accept, "application/json") && !strings.Contains(accept, "text/html")
}
