package httpapi

import (
	"net/http"

	"github.com/tessera-dev/tessera/internal/core"
)

// sessionRoute mints an anonymous demo session (SPEC §12). It is
// registered under /v1 only: it takes no key and no namespace.
func (s *Server) sessionRoute() route {
	return route{method: "POST", path: "/sessions", op: core.ActSessionStart,
		summary: "Start an anonymous demo session: a key for a namespace of practice tasks",
		handle:  s.startSession, out: created{core.Session{}}}
}

func (s *Server) startSession(c *call) error {
	if err := c.decode(&struct{}{}); err != nil {
		return err
	}
	sess, err := s.core.StartSession(c.ctx)
	if err != nil {
		return err
	}
	return c.json(http.StatusCreated, sess)
}
