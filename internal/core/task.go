package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/ids"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// Field bounds (SPEC §1, §5). Names share one rule so they are safe in
// URLs, logs and metric labels.
const (
	MaxTitleLen     = 200
	MaxUniqueKeyLen = 200
	MaxBriefLen     = 64 << 10
	MaxPayloadLen   = 256 << 10
	MaxResultLen    = 256 << 10
	MaxProgressLen  = 4 << 10
	MaxErrorLen     = 4 << 10
	MaxNoteLen      = 4 << 10
	MaxLabels       = 16
	MaxPriority     = 1_000_000
	MaxMaxAttempts  = 100
	MaxListLimit    = 200
	DefaultListSize = 50
	// MaxRunAhead bounds how far in the future a task may be scheduled.
	MaxRunAhead = 366 * 24 * time.Hour
)

// EnqueueParams is the body of POST /v1/tasks.
type EnqueueParams struct {
	Queue       string          `json:"queue,omitempty"`
	Title       string          `json:"title"`
	Brief       string          `json:"brief,omitempty"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	Labels      []string        `json:"labels,omitempty"`
	Priority    int             `json:"priority,omitempty"`
	Public      bool            `json:"public,omitempty"`
	MaxAttempts *int            `json:"max_attempts,omitempty"`
	RunAt       *time.Time      `json:"run_at,omitempty"`
	// After are the tasks this one waits on (deps.go): ids, or in a batch
	// the refs of earlier tasks.
	After           []string `json:"after,omitempty"`
	OnParentFailure string   `json:"on_parent_failure,omitempty"`
	// Ref names a task of a batch for the after of a later one.
	Ref string `json:"ref,omitempty"`
	// Requires and Group fit the task to a fleet (fleet.go).
	Requires []string `json:"requires,omitempty"`
	Group    string   `json:"group,omitempty"`
	// Trace is the producer's trace context (issue 43).
	Trace *Trace `json:"trace,omitempty"`
	// Gates start the task gated (gate.go): it is claimable once they
	// are answered.
	Gates []GateSpec `json:"gates,omitempty"`
	// UniqueKey: while an unfinished task of the queue holds the key,
	// the enqueue answers that task (deduplicated) instead of a new one.
	UniqueKey string `json:"unique_key,omitempty"`
	// Debounce: while the task its key points at has not been claimed,
	// the enqueue moves that task on (debounced) instead of making one.
	Debounce *Debounce `json:"debounce,omitempty"`
	// ParentResults hands the parents' (After's) outcomes and results to
	// every claim of the task.
	ParentResults bool `json:"parent_results,omitempty"`
}

// Debounce gathers a burst of enqueues into one task: each one, while the
// task has not been claimed, gives it its title, brief and payload and
// puts its run_at Seconds ahead, but no later than MaxSeconds after the
// burst's first enqueue (0: no bound).
type Debounce struct {
	Key        string `json:"key"`
	Seconds    int    `json:"seconds"`
	MaxSeconds int    `json:"max_seconds,omitempty"`
}

// validate is what an enqueue's bounds (bounds.go, checked before the
// core is called) cannot say: how far ahead of now run_at may be, and that
// a ref is for batches.
func (p *EnqueueParams) validate(now time.Time, batch bool) error {
	if p.Queue == "" {
		p.Queue = DefaultQueue
	}
	if p.RunAt != nil && p.RunAt.After(now.Add(MaxRunAhead)) {
		return tessera.Invalid("run_at", "run_at may be at most a year ahead")
	}
	if p.Ref != "" && !batch {
		return tessera.Invalid("ref", "ref names a task of a batch (POST /v1/tasks/batch) for the after of a later one")
	}
	if _, _, isID := ids.Parse(p.Ref); isID {
		// A later task's after could not tell it from the task of that id.
		return tessera.Invalid("ref", "ref %q has the form of a task id; give a ref another form", p.Ref)
	}
	if p.Trace != nil && !tessera.ValidTraceparent(p.Trace.Traceparent) {
		return tessera.Invalid("trace.traceparent", "traceparent %q is not a W3C traceparent of version 00 with ids not all zero", p.Trace.Traceparent)
	}
	if len(p.Gates) > 0 && len(p.After) > 0 {
		return tessera.Invalid("gates", "a task waits on parents (after) or on gates, not both: let the first run open its gates")
	}
	if _, err := makeGates(p.Gates, true, 0, now, ""); err != nil {
		return err
	}
	if d := p.Debounce; d != nil {
		switch {
		case p.UniqueKey != "":
			return tessera.Invalid("debounce", "a task is enqueued with a unique_key or a debounce, not both")
		case p.RunAt != nil:
			return tessera.Invalid("debounce", "a debounced task's run_at is debounce.seconds ahead of its last enqueue: give no run_at")
		case d.MaxSeconds != 0 && d.MaxSeconds < d.Seconds:
			return tessera.Invalid("debounce.max_seconds", "max_seconds (%d) is less than seconds (%d)", d.MaxSeconds, d.Seconds)
		}
	}
	if p.ParentResults && len(p.After) == 0 {
		return tessera.Invalid("parent_results", "parent_results hands a task its parents' results: enqueue it after them (after)")
	}
	if p.OnParentFailure != "" && len(p.After) == 0 {
		return tessera.Invalid("on_parent_failure", "on_parent_failure applies to a task enqueued after others (after)")
	}
	return nil
}

func nullToNil(v json.RawMessage) json.RawMessage {
	if string(v) == "null" {
		return nil
	}
	return v
}

// newTask builds the task p describes, enqueued by a at now. p has been
// validated.
func newTask(p *EnqueueParams, a *auth.Actor, ns string, now time.Time) *tessera.Task {
	maxAttempts := 3
	if p.MaxAttempts != nil {
		maxAttempts = *p.MaxAttempts
	}
	runAt := now
	if p.RunAt != nil && p.RunAt.After(now) {
		runAt = p.RunAt.UTC().Truncate(time.Millisecond)
	}
	var debounceKey string
	if d := p.Debounce; d != nil {
		debounceKey, runAt = d.Key, now.Add(time.Duration(d.Seconds)*time.Second)
	}
	labels := p.Labels
	if labels == nil {
		labels = []string{}
	}
	return &tessera.Task{
		Namespace: ns, ID: ids.New(now), Queue: p.Queue, Title: p.Title, Brief: p.Brief,
		Payload: nullToNil(p.Payload), Labels: labels, Priority: p.Priority, Public: p.Public,
		Requires: canonical(p.Requires), Group: p.Group, Trace: (*tessera.Trace)(p.Trace), UniqueKey: p.UniqueKey, DebounceKey: debounceKey, ParentResults: p.ParentResults,
		MaxAttempts: maxAttempts, State: tessera.StateReady, RunAt: runAt,
		CreatedBy: a.Principal.ID, CreatedAt: now, UpdatedAt: now,
	}
}

// insertTask stores a new task, made after its parents (refs: the tasks
// of its batch so far, by ref), and wakes its queue's claims once the
// transaction commits when it is claimable.
func (s *Service) insertTask(ctx context.Context, tx store.Tx, task *tessera.Task, p *EnqueueParams, refs map[string]string, now time.Time) error {
	d, err := s.linkParents(ctx, tx, task, p, refs, now)
	if err != nil {
		return err
	}
	task.Dependency = d
	if err := assignLane(ctx, tx, task, now); err != nil {
		return err
	}
	var gates []tessera.Gate
	if len(p.Gates) > 0 {
		if gates, err = makeGates(p.Gates, true, 0, now, ""); err != nil {
			return err
		}
		task.State, task.GateCount = tessera.StateGated, len(gates)
	}
	if err := tx.TaskInsert(ctx, task); err != nil {
		if task.UniqueKey != "" && errors.Is(err, store.ErrConflict) {
			// Another node's enqueue took the key after this one looked
			// (uniqueHolder): look again, and find its task.
			return fmt.Errorf("%w: %w", err, store.ErrRetry)
		}
		return err
	}
	if err := storeDependency(ctx, tx, task, d); err != nil {
		return err
	}
	if len(gates) > 0 {
		if err := s.addGates(ctx, tx, task, gates); err != nil {
			return err
		}
	}
	if task.State == tessera.StateReady {
		tx.Notify(ctx, laneTopic(task))
	}
	return nil
}

// Enqueue creates a task. With an idempotency key, a repeat returns the
// first task instead of creating another.
func (s *Service) Enqueue(ctx context.Context, a *auth.Actor, ns string, p EnqueueParams, idemKey string) (*tessera.Task, error) {
	a, err := s.authorize(ctx, a, ns, ActTaskEnqueue)
	if err != nil {
		return nil, err
	}
	req := p
	if err := p.validate(s.clock.Now(), false); err != nil {
		return nil, err
	}
	var out tessera.Task
	replayed := false
	err = s.auditedCreate(ctx, a, ns, ActTaskEnqueue, func(tx store.Tx, ev *tessera.AuditEvent) (err error) {
		now := ev.Time
		task := newTask(&p, a, ns, now)
		ev.Target, ev.Public, ev.Status = task.ID, task.Public, 201
		e := store.Idempotency{Namespace: ns, PrincipalID: a.Principal.ID, Route: "enqueue", Key: idemKey, CreatedAt: now}
		replayed, err = idempotent(ctx, tx, ev, e, req, &out, func() error {
			placed, err := s.place(ctx, tx, task, &p, nil, now)
			if err != nil {
				return err
			}
			if placed != task {
				ev.Target, ev.Public, ev.Status = placed.ID, placed.Public, 200
			}
			out = *placed
			// The response is remembered as sent: a replay after run_at
			// must still say scheduled.
			out.Show(now)
			return nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	s.countReplay(replayed, a, ns, ActTaskEnqueue)
	out.Show(s.clock.Now())
	return &out, nil
}

// MaxBatchTasks bounds a batch enqueue; the body limit (1 MiB) bounds its
// bytes.
const MaxBatchTasks = 500

// EnqueueBatchParams is the body of POST /v1/tasks/batch: each task as the
// body of POST /v1/tasks.
type EnqueueBatchParams struct {
	Tasks []EnqueueParams `json:"tasks"`
}

// TaskBatch is a batch enqueue's answer: its tasks in request order.
type TaskBatch struct {
	Tasks []tessera.Task `json:"tasks"`
}

// inBatch names the item at index i of a batch's list (tasks, items) in
// err's field and message.
func inBatch(list string, i int, err error) error {
	var e *tessera.Error
	if !errors.As(err, &e) {
		return err
	}
	at := fmt.Sprintf("%s[%d]", list, i)
	named := *e
	named.Field, named.Message = at, at+": "+e.Message
	if e.Field != "" {
		named.Field += "." + e.Field
	}
	return &named
}

// EnqueueBatch creates tasks in one transaction: all of them, or none when
// any is invalid or the transaction fails. Each task is validated before
// anything is written. With an idempotency key, a repeat of the batch
// returns the first answer instead of creating the tasks again.
//
// Each task gets its own task.enqueue event, as the single enqueue of it
// would: the audit trail and the activity feed name tasks (§9's target is
// a task id), and a task's history should not depend on which route made
// it. What a batch saves is the requests, the commits and the idempotency
// entry, one each for the whole batch.
func (s *Service) EnqueueBatch(ctx context.Context, a *auth.Actor, ns string, tasks []EnqueueParams, idemKey string) (*TaskBatch, error) {
	a, err := s.authorize(ctx, a, ns, ActTaskEnqueueBatch)
	if err != nil {
		return nil, err
	}
	// A repeat is compared with the request as sent; validation fills in
	// defaults, on a copy.
	req := tasks
	tasks = slices.Clone(tasks)
	now := s.clock.Now()
	for i := range tasks {
		if err := tasks[i].validate(now, true); err != nil {
			return nil, inBatch("tasks", i, err)
		}
	}
	var out TaskBatch
	replayed := false
	err = s.auditedCreate(ctx, a, ns, ActTaskEnqueueBatch, func(tx store.Tx, ev *tessera.AuditEvent) (err error) {
		e := store.Idempotency{Namespace: ns, PrincipalID: a.Principal.ID, Route: "enqueue_batch", Key: idemKey, CreatedAt: ev.Time}
		replayed, err = idempotent(ctx, tx, ev, e, req, &out, func() error {
			return s.insertBatch(ctx, tx, a, ns, tasks, ev, &out)
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	s.countReplay(replayed, a, ns, ActTaskEnqueueBatch)
	now = s.clock.Now()
	for i := range out.Tasks {
		out.Tasks[i].Show(now)
	}
	return &out, nil
}

// insertBatch stores a batch's validated tasks into out and writes a
// task.enqueue event for each: ev, which the audited action writes once fn
// returns, becomes the last task's; the others are written here, with the
// address hash act gives ev.
func (s *Service) insertBatch(ctx context.Context, tx store.Tx, a *auth.Actor, ns string, tasks []EnqueueParams, ev *tessera.AuditEvent, out *TaskBatch) error {
	now := ev.Time
	ipHash, _, err := s.ipHash(ctx, tx, now) // a fresh salt is remembered by act, which reads it again
	if err != nil {
		return err
	}
	out.Tasks = make([]tessera.Task, len(tasks))
	refs := map[string]string{}
	for i := range tasks {
		task, err := s.place(ctx, tx, newTask(&tasks[i], a, ns, now), &tasks[i], refs, now)
		if err != nil {
			return inBatch("tasks", i, err)
		}
		if ref := tasks[i].Ref; ref != "" {
			if _, dup := refs[ref]; dup {
				return inBatch("tasks", i, tessera.Invalid("ref", "ref %q names an earlier task of the batch already", ref))
			}
			refs[ref] = task.ID
		}
		// Remembered as sent, as Enqueue's answer is.
		out.Tasks[i] = *task
		out.Tasks[i].State = task.VisibleState(now)
		te := ev
		if i < len(tasks)-1 {
			te = &tessera.AuditEvent{Namespace: ns, PrincipalID: ev.PrincipalID, KeyID: ev.KeyID, IPHash: ipHash}
		}
		// Ids in request order: ev's was drawn before the others.
		te.ID, te.Time, te.Action, te.Target, te.Public, te.Status = ids.New(now), now, ActTaskEnqueue, task.ID, task.Public, 201
		if task.Deduplicated || task.Debounced {
			te.Status = 200
		}
		if te != ev {
			if err := tx.AuditInsert(ctx, te); err != nil {
				return err
			}
		}
	}
	return nil
}

// place enqueues p inside tx: it answers the task that holds p's unique
// key, deduplicated, or moves on the unclaimed task p's debounce key
// points at, debounced, or else inserts task (p's, new).
func (s *Service) place(ctx context.Context, tx store.Tx, task *tessera.Task, p *EnqueueParams, refs map[string]string, now time.Time) (*tessera.Task, error) {
	if held, err := uniqueHolder(ctx, tx, task); held != nil || err != nil {
		return held, err
	}
	var debounced string // the task the debounce key points at
	if task.DebounceKey != "" {
		held, from, err := s.debounce(ctx, tx, task, p, now)
		if held != nil || err != nil {
			return held, err
		}
		debounced = from
	}
	if err := s.insertTask(ctx, tx, task, p, refs, now); err != nil {
		return nil, err
	}
	if task.DebounceKey != "" {
		err := tx.DebouncePoint(ctx, task.Namespace, task.Queue, task.DebounceKey, debounced, task.ID)
		if errors.Is(err, store.ErrConflict) {
			// Another node's enqueue of the key pointed it first: look
			// again, and move that one's task on.
			return nil, fmt.Errorf("%w: %w", err, store.ErrRetry)
		}
		return task, err
	}
	return task, nil
}

// debounce moves on the task p's debounce key points at, if it has not
// been claimed (never run, not finished): p's title, brief and payload,
// and a run_at p.Debounce.Seconds from now, no later than MaxSeconds
// after the task was made. It returns that task, debounced; or nil and
// the task the key points at ("" for none), which a new task takes it
// from.
func (s *Service) debounce(ctx context.Context, tx store.Tx, task *tessera.Task, p *EnqueueParams, now time.Time) (*tessera.Task, string, error) {
	from, err := tx.DebounceHolder(ctx, task.Namespace, task.Queue, task.DebounceKey)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, "", nil
	case err != nil:
		return nil, "", err
	}
	held, err := tx.TaskGet(ctx, task.Namespace, from)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, from, nil // purged since
	case err != nil:
		return nil, "", err
	case held.Run != nil || held.State == tessera.StateLeased || tessera.Terminal(held.State):
		return nil, from, nil // claimed: the burst it gathered has started
	}
	before := held.Copy()
	held.Title, held.Brief, held.Payload = task.Title, task.Brief, task.Payload
	held.RunAt = task.RunAt
	if limit := p.Debounce.MaxSeconds; limit > 0 {
		if last := held.CreatedAt.Add(time.Duration(limit) * time.Second); held.RunAt.After(last) {
			held.RunAt = last
		}
	}
	held.UpdatedAt = now
	if err := tx.TaskUpdate(ctx, before, held); err != nil {
		return nil, "", err
	}
	if held.State == tessera.StateReady && !held.RunAt.After(now) {
		tx.Notify(ctx, laneTopic(held))
	}
	held.Debounced = true
	return held, "", nil
}

// uniqueHolder returns, deduplicated, the unfinished task of task's queue
// that holds task's unique key; nil when task has none or no task holds
// it.
func uniqueHolder(ctx context.Context, tx store.Tx, task *tessera.Task) (*tessera.Task, error) {
	if task.UniqueKey == "" {
		return nil, nil
	}
	held, err := tx.TaskByUniqueKey(ctx, task.Namespace, task.Queue, task.UniqueKey)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	held.Deduplicated = true
	return held, nil
}

// GetTask returns a task with its runs.
func (s *Service) GetTask(ctx context.Context, a *auth.Actor, ns, id string) (*tessera.Task, error) {
	a, err := s.authorize(ctx, a, ns, ActTaskGet)
	if err != nil {
		return nil, err
	}
	var task *tessera.Task
	err = s.auditedRead(ctx, a, ns, ActTaskGet, func(tx store.Tx, ev *tessera.AuditEvent) error {
		var err error
		if task, err = tx.TaskGet(ctx, ns, id); err != nil {
			return notFound(err, "task", id)
		}
		if task.Dependency, err = s.dependency(ctx, tx, task); err != nil {
			return err
		}
		switch task.Checkpoint, err = tx.CheckpointGet(ctx, ns, id); {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return err
		}
		if task.GateCount > 0 {
			if task.Gates, err = tx.GatesOf(ctx, ns, id); err != nil {
				return err
			}
		}
		ev.Target = id
		task.Runs, err = tx.RunList(ctx, ns, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	task.Show(s.clock.Now())
	return task, nil
}

// ListParams filters and pages GET /v1/tasks.
type ListParams struct {
	State  string
	Queue  string
	Label  string
	Cursor string
	Limit  int
	// Title and the creation range search (console.go).
	Title                       string
	CreatedAfter, CreatedBefore *time.Time
}

// TaskPage is one page of tasks; NextCursor is empty on the last page.
type TaskPage struct {
	Tasks      []tessera.Task `json:"tasks"`
	NextCursor string         `json:"next_cursor,omitempty"`
}

// ListTasks lists tasks newest first.
func (s *Service) ListTasks(ctx context.Context, a *auth.Actor, ns string, p ListParams) (*TaskPage, error) {
	a, err := s.authorize(ctx, a, ns, ActTaskList)
	if err != nil {
		return nil, err
	}
	before, limit, err := pageParams(p.Cursor, p.Limit)
	if err != nil {
		return nil, err
	}
	page := &TaskPage{Tasks: []tessera.Task{}}
	err = s.auditedRead(ctx, a, ns, ActTaskList, func(tx store.Tx, ev *tessera.AuditEvent) error {
		ev.Target = "tasks"
		now := s.clock.Now()
		// One extra row tells whether another page follows; a page also
		// ends once it carries store.PageBytes of briefs and payloads.
		var tasks []tessera.Task
		var err error
		if sel := (Selection{Queue: p.Queue, State: p.State, Title: p.Title, CreatedAfter: p.CreatedAfter, CreatedBefore: p.CreatedBefore}); sel.searches() {
			tasks, err = searchTasks(ctx, tx, ns, &sel, p.Label, before, limit+1, now)
		} else {
			tasks, err = tx.TaskList(ctx, ns, store.TaskFilter{StateFilter: tessera.StoredFilter(p.State, now),
				Queue: p.Queue, Label: p.Label, Before: before, Limit: limit + 1})
		}
		if err != nil {
			return err
		}
		n, more := store.CutPage(len(tasks), limit, func(i int) int { return tasks[i].ValueBytes() })
		if tasks = tasks[:n]; more {
			page.NextCursor = encodeCursor(tasks[n-1].ID)
		}
		for i := range tasks {
			tasks[i].Show(now)
		}
		page.Tasks = append(page.Tasks, tasks...)
		return nil
	})
	return page, err
}

// Counts returns task counts by queue and visible state.
func (s *Service) Counts(ctx context.Context, a *auth.Actor, ns string) (map[string]map[string]int, error) {
	a, err := s.authorize(ctx, a, ns, ActCounts)
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]int{}
	err = s.auditedRead(ctx, a, ns, ActCounts, func(tx store.Tx, ev *tessera.AuditEvent) error {
		ev.Target = "counts"
		clear(out)
		counts, err := tx.TaskStateCounts(ctx, ns, store.AllTasks)
		if err != nil {
			return err
		}
		var ready, leased []string
		for _, c := range counts {
			if c.Count == 0 {
				continue
			}
			if out[c.Queue] == nil {
				out[c.Queue] = map[string]int{}
			}
			out[c.Queue][c.State] = c.Count
			switch c.State {
			case tessera.StateReady:
				ready = append(ready, c.Queue)
			case tessera.StateLeased:
				leased = append(leased, c.Queue)
			}
		}
		now := s.clock.Now()
		// Ready is stored for scheduled tasks too, and leased for leases
		// past their expiry that no claim noticed yet: each is told apart
		// through its index, costing what it numbers.
		scheduled, err := tx.TaskScheduled(ctx, ns, ready, now, store.AllTasks)
		if err != nil {
			return err
		}
		moveCounts(out, scheduled, tessera.StateReady, tessera.StateScheduled)
		lapsed, err := tx.TaskLapsedCounts(ctx, ns, leased, now, store.AllTasks)
		moveCounts(out, lapsed, tessera.StateLeased, CountLapsed)
		return err
	})
	return out, err
}

// CountLapsed is the key of GET /v1/counts under which a queue's leases
// past their expiry are counted, out of leased: tasks that go back to
// their queue (or die) as soon as a claim or their holder notices.
const CountLapsed = "lapsed"

// moveCounts moves n[q] tasks of each queue q from one key of out to
// another.
func moveCounts(out map[string]map[string]int, n map[string]int, from, to string) {
	for q, k := range n {
		out[q][to] = k
		if out[q][from] -= k; out[q][from] == 0 {
			delete(out[q], from)
		}
	}
}

// Task state changes a producer makes (§1).
type TaskChange string

const (
	ChangeCancel TaskChange = "cancel"
	ChangePause  TaskChange = "pause"
	ChangeResume TaskChange = "resume"
	ChangeRetry  TaskChange = "retry"
)

// ChangeTask applies cancel, pause, resume or retry to a task, written
// over the version it read: a task that changed meanwhile (a claim, a
// heartbeat) is read again and the change decided anew.
//
// A retry with dependents also makes the tasks this one's failure canceled
// wait again, and theirs in turn (deps.go).
func (s *Service) ChangeTask(ctx context.Context, a *auth.Actor, ns, id string, change TaskChange, dependents bool) (*tessera.Task, error) {
	op := "task." + string(change)
	a, err := s.authorize(ctx, a, ns, op)
	if err != nil {
		return nil, err
	}
	var task *tessera.Task
	err = s.audited(ctx, a, ns, op, func(tx store.Tx, ev *tessera.AuditEvent) error {
		var err error
		if task, err = tx.TaskGet(ctx, ns, id); err != nil {
			return notFound(err, "task", id)
		}
		ev.Target = id
		if task.Lease != nil {
			ev.RunID = task.Lease.RunID
		}
		return s.applyChange(ctx, tx, a, task, change, ev.Time, dependents, &budget{left: settleBatch})
	})
	if err != nil {
		return nil, err
	}
	task.Show(s.clock.Now())
	return task, nil
}

// applyChange applies a producer's change to task, read in tx, written
// over the version read. A retry with dependents makes the tasks this
// one's failure canceled wait again (deps.go); settling children spends b.
func (s *Service) applyChange(ctx context.Context, tx store.Tx, a *auth.Actor, task *tessera.Task, change TaskChange, now time.Time, dependents bool, b *budget) error {
	ns, id := task.Namespace, task.ID
	before := task.Copy()
	invalid := tessera.Errorf(tessera.CodeInvalidState, "cannot %s a task that is %s", change, task.VisibleState(now))
	var cancelRequested bool
	switch change {
	case ChangeCancel:
		switch {
		case tessera.Terminal(task.State):
			return invalid
		case task.State == tessera.StateLeased:
			if task.CancelRequested {
				return nil
			}
			// The holder learns of it and the task ends at its next
			// heartbeat, submit or lapse (§1).
			task.CancelRequested, cancelRequested = true, true
		default:
			task.State, task.FinishedAt = tessera.StateCanceled, &now
		}
	case ChangePause:
		if task.State != tessera.StateReady {
			return invalid
		}
		task.State = tessera.StatePaused
	case ChangeResume:
		if task.State != tessera.StatePaused {
			return invalid
		}
		task.State = tessera.StateReady
	case ChangeRetry:
		if task.State != tessera.StateDead && task.State != tessera.StateCanceled {
			return invalid
		}
		task.State, task.Attempts, task.RunAt, task.CancelRequested = tessera.StateReady, 0, now, false
		task.Error, task.Result, task.FinishedAt = "", nil, nil
		// Unfinished again, it needs its unique key back.
		if held, err := uniqueHolder(ctx, tx, task); held != nil || err != nil {
			if err == nil {
				err = tessera.Errorf(tessera.CodeInvalidState, "cannot retry task %s: task %s holds its unique key %q and is not finished", id, held.ID, task.UniqueKey)
			}
			return err
		}
	default:
		return errors.New("unknown task change " + string(change))
	}
	d, err := s.dependency(ctx, tx, task)
	if err != nil {
		return err
	}
	if change == ChangeRetry && d != nil {
		// A task canceled by a parent's failure that is retried by hand
		// runs anyway: only the parents not yet finished keep it waiting.
		if d.CanceledBy != "" {
			d.CanceledBy = ""
			if err := tx.DependencyPut(ctx, ns, id, d); err != nil {
				return err
			}
		}
		if d.WaitingOn > 0 {
			task.State = tessera.StateWaiting
		}
	}
	task.UpdatedAt = now
	if err := tx.TaskUpdate(ctx, before, task); err != nil {
		if errors.Is(err, store.ErrConflict) {
			// Another node's enqueue took the retried task's unique key
			// after uniqueHolder looked: look again.
			return fmt.Errorf("%w: %w", err, store.ErrRetry)
		}
		return err
	}
	task.Dependency = d
	if cancelRequested {
		tx.Notify(ctx, taskTopic(ns, id))
		return tx.TaskEventAppend(ctx, ns, id, &tessera.TaskEvent{Kind: tessera.EventCancelRequested, By: a.Principal.ID, Time: now})
	}
	if change == ChangeRetry && dependents {
		w := &store.DepWork{Namespace: ns, Parent: id, Kind: store.DepRewait}
		if err := s.settleFrom(ctx, tx, w, task, now, b); err != nil {
			return err
		}
	}
	return s.moved(ctx, tx, task, now, b)
}

// AddNote appends a note for the task's lease holder. The producer side
// (enqueue scope) and the holder itself may write notes.
func (s *Service) AddNote(ctx context.Context, a *auth.Actor, ns, id, body string) (*tessera.TaskEvent, error) {
	a, err := s.authorize(ctx, a, ns, ActTaskNote)
	if err != nil {
		return nil, err
	}
	producer := a.Scopes().Allows(tessera.ActionEnqueue)
	var note *tessera.TaskEvent
	err = s.audited(ctx, a, ns, ActTaskNote, func(tx store.Tx, ev *tessera.AuditEvent) error {
		note = &tessera.TaskEvent{Kind: tessera.EventNote, Body: body, By: a.Principal.ID, Time: ev.Time}
		task, err := tx.TaskGet(ctx, ns, id)
		if err != nil {
			return notFound(err, "task", id)
		}
		ev.Target, ev.Status = id, 201
		if task.Lease != nil {
			ev.RunID = task.Lease.RunID
		}
		holder := a.Scopes().Allows(tessera.ActionClaim) && task.Lease != nil && task.Lease.Holder == a.Principal.ID
		if !producer && !holder {
			return tessera.Errorf(tessera.CodeForbidden, "notes need the enqueue scope or the task's lease")
		}
		tx.Notify(ctx, taskTopic(ns, id))
		return tx.TaskEventAppend(ctx, ns, id, note)
	})
	if err != nil {
		return nil, err
	}
	return note, nil
}
