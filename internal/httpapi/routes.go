package httpapi

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// routes is the table every handler is registered from, under /v1 and
// /ns/{namespace}/v1 alike.
func (s *Server) routes() []route {
	return slices.Concat(s.taskRoutes(), s.recordRoutes(), s.auditRoutes())
}

func (s *Server) taskRoutes() []route {
	return []route{
		{method: "GET", path: "/me", op: core.ActMe, summary: "The caller's principal and key", handle: s.me, out: core.Me{}},

		{method: "POST", path: "/tasks", op: core.ActTaskEnqueue, summary: "Enqueue a task", handle: s.enqueue, in: core.EnqueueParams{}, out: created{tessera.Task{}}},
		{method: "POST", path: "/tasks/batch", op: core.ActTaskEnqueueBatch, summary: "Enqueue 1–500 tasks in one transaction, all or none", handle: s.enqueueBatch, in: core.EnqueueBatchParams{}, out: created{core.TaskBatch{}}},
		{method: "GET", path: "/tasks", op: core.ActTaskList, summary: "List tasks, newest first", handle: s.listTasks, in: listTasksQuery{}, out: core.TaskPage{}},
		{method: "GET", path: "/tasks/{id}", op: core.ActTaskGet, summary: "A task with its runs", handle: s.getTask, out: tessera.Task{}},
		{method: "POST", path: "/tasks/{id}/cancel", op: core.ActTaskCancel, summary: "Cancel a task", handle: s.changeTask(core.ChangeCancel), out: tessera.Task{}},
		{method: "POST", path: "/tasks/{id}/pause", op: core.ActTaskPause, summary: "Pause a ready or scheduled task", handle: s.changeTask(core.ChangePause), out: tessera.Task{}},
		{method: "POST", path: "/tasks/{id}/resume", op: core.ActTaskResume, summary: "Resume a paused task", handle: s.changeTask(core.ChangeResume), out: tessera.Task{}},
		{method: "POST", path: "/tasks/{id}/retry", op: core.ActTaskRetry, summary: "Retry a dead or canceled task", handle: s.changeTask(core.ChangeRetry), out: tessera.Task{}},
		// Notes come from producers (enqueue) or the lease holder (claim):
		// the edge checks the grant, the core the rest.
		{method: "POST", path: "/tasks/{id}/notes", op: core.ActTaskNote, summary: "Leave a note for the lease holder", handle: s.addNote, in: noteParams{}, out: created{tessera.TaskEvent{}}},
		{method: "GET", path: "/counts", op: core.ActCounts, summary: "Task counts by queue and state", handle: s.counts, out: countsResponse{}},

		{method: "POST", path: "/claims", op: core.ActClaim, summary: "Claim the next ready task of a queue", handle: s.claim, in: core.ClaimParams{}, out: core.Claimed{},
			noContent: "nothing is ready: no body, and Retry-After advises when to poll again"},
		{method: "POST", path: "/claims/{task}/heartbeat", op: core.ActHeartbeat, summary: "Extend a lease", handle: s.heartbeat, in: core.HeartbeatParams{}, out: core.Heartbeat{}},
		{method: "POST", path: "/claims/{task}/submit", op: core.ActSubmit, summary: "Submit a run's outcome", handle: s.submit, in: core.SubmitParams{}, out: tessera.Task{}},
		{method: "POST", path: "/claims/{task}/release", op: core.ActRelease, summary: "Give a task back without using an attempt", handle: s.release, in: core.ReleaseParams{}, out: tessera.Task{}},
		{method: "GET", path: "/claims/{task}/events", op: core.ActClaimEvents, summary: "Long-poll the events of a held task", handle: s.claimEvents, in: eventsQuery{}, out: core.ClaimEvents{}},

		{method: "POST", path: "/admin/principals", op: core.ActPrincipalNew, summary: "Create a principal", handle: s.createPrincipal, in: core.PrincipalParams{}, out: created{tessera.Principal{}}},
		{method: "GET", path: "/admin/principals", op: core.ActPrincipalList, summary: "List principals", handle: s.listPrincipals, in: pageQuery{}, out: core.PrincipalPage{}},
		{method: "PATCH", path: "/admin/principals/{id}", op: core.ActPrincipalEdit, summary: "Change a principal", handle: s.updatePrincipal, in: core.PrincipalPatch{}, out: tessera.Principal{}},
		{method: "POST", path: "/admin/keys", op: core.ActKeyNew, summary: "Create a key; its secret is returned once", handle: s.createKey, in: core.KeyParams{}, out: created{core.NewKey{}}},
		{method: "GET", path: "/admin/keys", op: core.ActKeyList, summary: "List keys (no secrets)", handle: s.listKeys, in: pageQuery{}, out: core.KeyPage{}},
		{method: "DELETE", path: "/admin/keys/{id}", op: core.ActKeyRevoke, summary: "Revoke a key", handle: s.revokeKey},
		{method: "DELETE", path: "/admin/namespaces/{ns}", op: core.ActNamespacePurge, summary: "Purge a namespace's tasks, records, blobs and their bytes (not main)", handle: s.purgeNamespace, out: core.Purged{}},
		{method: "GET", path: "/admin/namespaces", op: core.ActNamespaceList, summary: "List namespaces", handle: s.listNamespaces, in: pageQuery{}, out: core.NamespacePage{}},
		{method: "GET", path: "/admin/storage", op: core.ActStorage, summary: "Today's metered storage rows", handle: s.storage, out: meter.Totals{}},
		{method: "PUT", path: "/admin/storage/allowance", op: core.ActAllowance, summary: "Change the daily storage allowance (0 = unlimited)", handle: s.setAllowance, in: meter.Allowance{}, out: meter.Totals{}},
	}
}

func (s *Server) me(c *call) error {
	me, err := s.core.WhoAmI(c.ctx, c.actor)
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

// enqueueBatch decodes the batch's envelope, then each task as the body
// of a single enqueue (core.DecodeBatch), so a task's fault is refused
// alike and named tasks[i].field.
func (s *Server) enqueueBatch(c *call) error {
	var body struct {
		Tasks []json.RawMessage `json:"tasks"`
	}
	if err := c.decode(&body); err != nil {
		return err
	}
	tasks, err := core.DecodeBatch(body.Tasks, DecodeJSON)
	if err != nil {
		return err
	}
	key, err := c.idempotencyKey()
	if err != nil {
		return err
	}
	batch, err := s.core.EnqueueBatch(c.ctx, c.actor, c.ns, tasks, key)
	if err != nil {
		return err
	}
	return c.json(http.StatusCreated, batch)
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
	start := time.Now()
	claimed, err := s.core.Claim(c.ctx, c.actor, c.ns, p)
	if err != nil {
		return err
	}
	if claimed.Lease == nil {
		s.metricsReg.observeClaim("empty", time.Since(start))
		c.w.Header().Set("Retry-After", strconv.Itoa(claimed.RetryAfter))
		if claimed.QueueUnknown {
			c.w.Header().Set("Tessera-Queue-Known", "false")
		}
		c.w.WriteHeader(http.StatusNoContent)
		return nil
	}
	s.metricsReg.observeClaim("granted", time.Since(start))
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
	cursor, limit, err := c.page()
	if err != nil {
		return err
	}
	page, err := s.core.ListNamespaces(c.ctx, c.actor, cursor, limit)
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, page)
}

func (s *Server) purgeNamespace(c *call) error {
	out, err := s.core.PurgeNamespace(c.ctx, c.actor, c.r.PathValue("ns"))
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, out)
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

// Query parameters, for the API description.
type listTasksQuery struct {
	State string `query:"state" doc:"only tasks in this state"`
	Queue string `query:"queue" doc:"only tasks of this queue"`
	Label string `query:"label" doc:"only tasks with this label"`
	pageQuery
}

type eventsQuery struct {
	Since int64 `query:"since" doc:"next_since of the previous answer; 0 for every event"`
	Wait  int   `query:"wait" doc:"seconds to wait for an event, 0–30"`
}
