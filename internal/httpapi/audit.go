package httpapi

import (
	"net/http"
	"time"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// auditRoutes are the audit reads of SPEC §3.3 and §3.8.
func (s *Server) auditRoutes() []route {
	return []route{
		{method: "GET", path: "/me/audit", op: core.ActMyAudit, summary: "The caller's own audit events and counters of the last 24 h", handle: s.myAudit, in: myAuditQuery{}, out: core.AuditPage{}},
		{method: "GET", path: "/admin/audit", op: core.ActAdminAudit, summary: "Audit events and counters of the last 24 h", handle: s.adminAudit, in: adminAuditQuery{}, out: core.AuditPage{}},
	}
}

type myAuditQuery struct {
	Action  string `query:"action" doc:"only this action, e.g. task.enqueue"`
	Outcome string `query:"outcome" doc:"counters with this outcome, e.g. forbidden or empty"`
	Since   string `query:"since" doc:"RFC 3339; at most 24 h back"`
	Cursor  string `query:"cursor" doc:"next_cursor of the previous page"`
	Limit   int    `query:"limit" doc:"1–200, default 50"`
}

type adminAuditQuery struct {
	Namespace string `query:"namespace" doc:"only this namespace"`
	Principal string `query:"principal" doc:"only this principal id"`
	myAuditQuery
}

// auditQuery reads the filters both audit routes share.
func (c *call) auditQuery() (core.AuditQuery, error) {
	var q core.AuditQuery
	var err error
	for name, dst := range map[string]*string{"namespace": &q.Namespace, "principal": &q.Principal,
		"action": &q.Action, "outcome": &q.Outcome, "cursor": &q.Cursor} {
		if *dst, err = c.query(name); err != nil {
			return q, err
		}
	}
	limit, err := c.queryInt("limit", 1, core.MaxListLimit)
	if err != nil {
		return q, err
	}
	q.Limit = int(limit)
	if v := c.r.URL.Query().Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return q, tessera.Invalid("since", "since must be an RFC 3339 time")
		}
		q.Since = &t
	}
	return q, nil
}

func (s *Server) myAudit(c *call) error {
	q, err := c.auditQuery()
	if err != nil {
		return err
	}
	if q.Namespace != "" || q.Principal != "" {
		return tessera.Invalid("namespace", "your own audit takes no namespace or principal filter")
	}
	page, err := s.core.MyAudit(c.ctx, c.actor, q)
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, page)
}

func (s *Server) adminAudit(c *call) error {
	q, err := c.auditQuery()
	if err != nil {
		return err
	}
	page, err := s.core.AdminAudit(c.ctx, c.actor, q)
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, page)
}
