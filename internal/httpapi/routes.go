package httpapi

import (
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// routes is the table every handler is registered from, under /v1 and
// /ns/{namespace}/v1 alike.
func (s *Server) routes() []route {
	return slices.Concat(s.taskRoutes(), s.recordRoutes(), s.auditRoutes())
}

func (s *Server) taskRoutes() []route {
	return []route{
		{"GET", "/me", anyKey, "", "The caller's principal and key", s.me, nil, core.Me{}},

		{"POST", "/tasks", granted, tessera.ActionEnqueue, "Enqueue a task", s.enqueue, core.EnqueueParams{}, created{tessera.Task{}}},
		{"GET", "/tasks", granted, tessera.ActionRead, "List tasks, newest first", s.listTasks, nil, core.TaskPage{}},
		{"GET", "/tasks/{id}", granted, tessera.ActionRead, "A task with its runs", s.getTask, nil, tessera.Task{}},
		{"POST", "/tasks/{id}/cancel", granted, tessera.ActionEnqueue, "Cancel a task", s.changeTask(core.ChangeCancel), nil, tessera.Task{}},
		{"POST", "/tasks/{id}/pause", granted, tessera.ActionEnqueue, "Pause a ready or scheduled task", s.changeTask(core.ChangePause), nil, tessera.Task{}},
		{"POST", "/tasks/{id}/resume", granted, tessera.ActionEnqueue, "Resume a paused task", s.changeTask(core.ChangeResume), nil, tessera.Task{}},
		{"POST", "/tasks/{id}/retry", granted, tessera.ActionEnqueue, "Retry a dead or canceled task", s.changeTask(core.ChangeRetry), nil, tessera.Task{}},
		// Notes come from producers (enqueue) or the lease holder (claim):
		// the edge checks the grant, the core the rest.
		{"POST", "/tasks/{id}/notes", granted, "", "Leave a note for the lease holder", s.addNote, noteParams{}, created{tessera.TaskEvent{}}},
		{"GET", "/counts", granted, tessera.ActionRead, "Task counts by queue and state", s.counts, nil, countsResponse{}},

		{"POST", "/claims", granted, tessera.ActionClaim, "Claim the next ready task of a queue", s.claim, core.ClaimParams{}, core.Claimed{}},
		{"POST", "/claims/{task}/heartbeat", granted, tessera.ActionClaim, "Extend a lease", s.heartbeat, core.HeartbeatParams{}, core.Heartbeat{}},
		{"POST", "/claims/{task}/submit", granted, tessera.ActionClaim, "Submit a run's outcome", s.submit, core.SubmitParams{}, tessera.Task{}},
		{"POST", "/claims/{task}/release", granted, tessera.ActionClaim, "Give a task back without using an attempt", s.release, core.ReleaseParams{}, tessera.Task{}},
		{"GET", "/claims/{task}/events", granted, tessera.ActionClaim, "Long-poll the events of a held task", s.claimEvents, nil, core.ClaimEvents{}},

		{"POST", "/admin/principals", adminOnly, "", "Create a principal", s.createPrincipal, core.PrincipalParams{}, created{tessera.Principal{}}},
		{"GET", "/admin/principals", adminOnly, "", "List principals", s.listPrincipals, nil, core.PrincipalPage{}},
		{"PATCH", "/admin/principals/{id}", adminOnly, "", "Change a principal", s.updatePrincipal, core.PrincipalPatch{}, tessera.Principal{}},
		{"POST", "/admin/keys", adminOnly, "", "Create a key; its secret is returned once", s.createKey, core.KeyParams{}, created{core.NewKey{}}},
		{"GET", "/admin/keys", adminOnly, "", "List keys (no secrets)", s.listKeys, nil, core.KeyPage{}},
		{"DELETE", "/admin/keys/{id}", adminOnly, "", "Revoke a key", s.revokeKey, nil, nil},
		{"GET", "/admin/namespaces", adminOnly, "", "List namespaces", s.listNamespaces, nil, namespacesResponse{}},
		{"GET", "/admin/storage", adminOnly, "", "Today's metered storage rows", s.storage, nil, meter.Totals{}},
		{"PUT", "/admin/storage/allowance", adminOnly, "", "Change the daily storage allowance (0 = unlimited)", s.setAllowance, meter.Allowance{}, meter.Totals{}},
	}
}

func (s *Server) me(c *call) error {
	me, err := s.core.WhoAmI(c.ctx, c.actor, c.ns)
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, me)
}

func (s *Server) enqueue(c *call) error {
	var p core.EnqueueParams
	if err := c.decode(&p); err != nil {
		return err
	}
	key, err := c.idempotencyKey()
	if err != nil {
		return err
	}
	task, err := s.core.Enqueue(c.ctx, c.actor, c.ns, p, key)
	if err != nil {
		return err
	}
	return c.json(http.StatusCreated, task)
}

func (s *Server) listTasks(c *call) error {
	var p core.ListParams
	var err error
	for name, dst := range map[string]*string{"state": &p.State, "queue": &p.Queue, "label": &p.Label, "cursor": &p.Cursor} {
		if *dst, err = c.query(name); err != nil {
			return err
		}
	}
	limit, err := c.queryInt("limit", 1, core.MaxListLimit)
	if err != nil {
		return err
	}
	p.Limit = int(limit)
	page, err := s.core.ListTasks(c.ctx, c.actor, c.ns, p)
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, page)
}

func (s *Server) getTask(c *call) error {
	id, err := c.pathID("id")
	if err != nil {
		return err
	}
	task, err := s.core.GetTask(c.ctx, c.actor, c.ns, id)
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, task)
}

func (s *Server) changeTask(change core.TaskChange) func(*call) error {
	return func(c *call) error {
		id, err := c.pathID("id")
		if err != nil {
			return err
		}
		if err := c.decode(&struct{}{}); err != nil {
			return err
		}
		task, err := s.core.ChangeTask(c.ctx, c.actor, c.ns, id, change)
		if err != nil {
			return err
		}
		return c.json(http.StatusOK, task)
	}
}

func (s *Server) addNote(c *call) error {
	id, err := c.pathID("id")
	if err != nil {
		return err
	}
	var p noteParams
	if err := c.decode(&p); err != nil {
		return err
	}
	ev, err := s.core.AddNote(c.ctx, c.actor, c.ns, id, p.Body)
	if err != nil {
		return err
	}
	return c.json(http.StatusCreated, ev)
}

func (s *Server) counts(c *call) error {
	counts, err := s.core.Counts(c.ctx, c.actor, c.ns)
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, countsResponse{Queues: counts})
}

func (s *Server) claim(c *call) error {
	var p core.ClaimParams
	if err := c.decode(&p); err != nil {
		return err
	}
	claimed, err := s.core.Claim(c.ctx, c.actor, c.ns, p)
	if err != nil {
		return err
	}
	if claimed.Lease == nil {
		c.w.Header().Set("Retry-After", strconv.Itoa(claimed.RetryAfter))
		c.w.WriteHeader(http.StatusNoContent)
		return nil
	}
	return c.json(http.StatusOK, claimed)
}

func (s *Server) heartbeat(c *call) error {
	id, err := c.pathID("task")
	if err != nil {
		return err
	}
	var p core.HeartbeatParams
	if err := c.decode(&p); err != nil {
		return err
	}
	hb, err := s.core.Heartbeat(c.ctx, c.actor, c.ns, id, p)
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, hb)
}

func (s *Server) submit(c *call) error {
	id, err := c.pathID("task")
	if err != nil {
		return err
	}
	var p core.SubmitParams
	if err := c.decode(&p); err != nil {
		return err
	}
	key, err := c.idempotencyKey()
	if err != nil {
		return err
	}
	task, err := s.core.Submit(c.ctx, c.actor, c.ns, id, p, key)
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, task)
}

func (s *Server) release(c *call) error {
	id, err := c.pathID("task")
	if err != nil {
		return err
	}
	var p core.ReleaseParams
	if err := c.decode(&p); err != nil {
		return err
	}
	task, err := s.core.Release(c.ctx, c.actor, c.ns, id, p)
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, task)
}

func (s *Server) claimEvents(c *call) error {
	id, err := c.pathID("task")
	if err != nil {
		return err
	}
	since, err := c.queryInt("since", 0, 1<<62)
	if err != nil {
		return err
	}
	wait, err := c.queryInt("wait", 0, core.MaxEventsWait)
	if err != nil {
		return err
	}
	evs, err := s.core.Events(c.ctx, c.actor, c.ns, id, since, time.Duration(wait)*time.Second)
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, evs)
}

func (s *Server) createPrincipal(c *call) error {
	var p core.PrincipalParams
	if err := c.decode(&p); err != nil {
		return err
	}
	pr, err := s.core.CreatePrincipal(c.ctx, c.actor, p)
	if err != nil {
		return err
	}
	return c.json(http.StatusCreated, pr)
}

func (s *Server) listPrincipals(c *call) error {
	cursor, limit, err := c.page()
	if err != nil {
		return err
	}
	page, err := s.core.ListPrincipals(c.ctx, c.actor, cursor, limit)
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, page)
}

func (s *Server) updatePrincipal(c *call) error {
	id, err := c.pathID("id")
	if err != nil {
		return err
	}
	var p core.PrincipalPatch
	if err := c.decode(&p); err != nil {
		return err
	}
	pr, err := s.core.UpdatePrincipal(c.ctx, c.actor, id, p)
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, pr)
}

func (s *Server) createKey(c *call) error {
	var p core.KeyParams
	if err := c.decode(&p); err != nil {
		return err
	}
	k, err := s.core.CreateKey(c.ctx, c.actor, p)
	if err != nil {
		return err
	}
	return c.json(http.StatusCreated, k)
}

func (s *Server) listKeys(c *call) error {
	cursor, limit, err := c.page()
	if err != nil {
		return err
	}
	page, err := s.core.ListKeys(c.ctx, c.actor, cursor, limit)
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, page)
}

func (s *Server) revokeKey(c *call) error {
	id, err := c.pathID("id")
	if err != nil {
		return err
	}
	if err := s.core.RevokeKey(c.ctx, c.actor, id); err != nil {
		return err
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) listNamespaces(c *call) error {
	ns, err := s.core.ListNamespaces(c.ctx, c.actor)
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, namespacesResponse{Namespaces: ns})
}

func (s *Server) storage(c *call) error {
	t, err := s.core.StorageToday(c.ctx, c.actor)
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, t)
}

func (s *Server) setAllowance(c *call) error {
	var a meter.Allowance
	if err := c.decode(&a); err != nil {
		return err
	}
	t, err := s.core.SetAllowance(c.ctx, c.actor, a)
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, t)
}

// page reads the cursor and limit of an admin listing.
func (c *call) page() (string, int, error) {
	cursor, err := c.query("cursor")
	if err != nil {
		return "", 0, err
	}
	limit, err := c.queryInt("limit", 1, core.MaxListLimit)
	return cursor, int(limit), err
}

type noteParams struct {
	Body string `json:"body"`
}

// countsResponse maps queue → visible state → number of tasks.
type countsResponse struct {
	Queues map[string]map[string]int `json:"queues"`
}

type namespacesResponse struct {
	Namespaces []store.Namespace `json:"namespaces"`
}
