package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// Task dependencies. A task enqueued after others waits (state waiting,
// never claimable) until every parent has finished: succeeded, or — under
// on_parent_failure "run" — ended dead or canceled. Under "cancel" (the
// default) a parent that ends dead or canceled cancels the task, and the
// cancel runs on to the task's own dependents. A parent finishes only in a
// transaction that changes it (an accepted submit: the live lease's, so a
// stale holder's late submit settles nothing), and that same transaction
// settles its first children; a parent with more settles the rest in
// bounded batches after it (store DepWork), so no transaction holds the
// writer for long.

// MaxParents bounds a task's parents.
const MaxParents = 100

// settleBatch is how many children one transaction settles: the finishing
// parent's transaction, then each batch of the dependency worker.
const settleBatch = 100

// depWorkTopic wakes the dependency worker: some parent has children left
// to settle.
const depWorkTopic = "w\x00"

// budget is what is left of a transaction's share of children to settle.
type budget struct{ left int }

// linkParents makes task wait on its parents, inside the transaction that
// inserts it (before the insert: it sets the task's state). after names
// parents by task id or, in a batch, by the ref of an earlier task (refs:
// ref → id). A parent that already succeeded is counted as finished; one
// that ended dead or canceled is applied at once, as if it ended now.
// Parents are held (store TaskHold) until the transaction ends, so a parent
// that finishes meanwhile on another node either settles this task, or is
// seen here finished.
func (s *Service) linkParents(ctx context.Context, tx store.Tx, task *tessera.Task, p *EnqueueParams, refs map[string]string, now time.Time) (*tessera.Dependency, error) {
	if len(p.After) == 0 {
		return nil, nil
	}
	d := &tessera.Dependency{OnParentFailure: p.OnParentFailure, After: []string{}, Settled: []string{}}
	if d.OnParentFailure == "" {
		d.OnParentFailure = tessera.ParentFailureCancel
	}
	for _, name := range p.After {
		id, ref := refs[name]
		if !ref {
			id = name
		}
		if slices.Contains(d.After, id) {
			continue
		}
		d.After = append(d.After, id)
		if ref {
			d.WaitingOn++ // a task of this batch: it cannot have finished
			continue
		}
		parent, err := tx.TaskHold(ctx, task.Namespace, id)
		if errors.Is(err, store.ErrNotFound) {
			return nil, tessera.Invalid("after", "after names %q, which is neither a task of namespace %s nor the ref of an earlier task of the batch", name, task.Namespace)
		}
		if err != nil {
			return nil, err
		}
		switch {
		case parent.State == tessera.StateSucceeded:
			d.Settled = append(d.Settled, id)
		case parent.State == tessera.StateDead || parent.State == tessera.StateCanceled:
			parentFailed(task, d, parent, now)
		default:
			d.WaitingOn++
		}
	}
	if task.State == tessera.StateReady && d.WaitingOn > 0 {
		task.State = tessera.StateWaiting
	}
	return d, nil
}

// dependency reads what task waits on; nil for a task that waits on
// nothing.
func (s *Service) dependency(ctx context.Context, tx store.Tx, task *tessera.Task) (*tessera.Dependency, error) {
	d, err := tx.DependencyGet(ctx, task.Namespace, task.ID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	return d, err
}

// storeDependency writes a new task's dependency and its edges.
func storeDependency(ctx context.Context, tx store.Tx, task *tessera.Task, d *tessera.Dependency) error {
	if d == nil {
		return nil
	}
	if err := tx.DependencyPut(ctx, task.Namespace, task.ID, d); err != nil {
		return err
	}
	return tx.DependencyEdgesAdd(ctx, task.Namespace, task.ID, d.After)
}

// parentFailed applies a parent that ended dead or canceled to a child
// not yet finished: counted as finished under "run", the child canceled
// (naming it) under "cancel".
func parentFailed(child *tessera.Task, d *tessera.Dependency, parent *tessera.Task, now time.Time) {
	d.Settled = append(d.Settled, parent.ID)
	if d.FailedParent == "" {
		d.FailedParent = parent.ID
	}
	if d.OnParentFailure == tessera.ParentFailureRun {
		return
	}
	d.CanceledBy = parent.ID
	child.State, child.FinishedAt = tessera.StateCanceled, &now
	child.Error = fmt.Sprintf("canceled: parent %s ended %s", parent.ID, parent.State)
}

// finished settles the children of a task that has just reached a
// terminal state, in the transaction that took it there: as many as the
// budget allows, the rest left to the dependency worker.
func (s *Service) finished(ctx context.Context, tx store.Tx, parent *tessera.Task, now time.Time, b *budget) error {
	return s.settleFrom(ctx, tx, &store.DepWork{Namespace: parent.Namespace, Parent: parent.ID, Kind: store.DepSettle}, parent, now, b)
}

// settleFrom settles the children of w's parent after w.After, within
// the budget; what is left goes back to the worker as w with its cursor
// moved (a new piece of work when w is not stored yet).
func (s *Service) settleFrom(ctx context.Context, tx store.Tx, w *store.DepWork, parent *tessera.Task, now time.Time, b *budget) error {
	cursor := w.After
	for {
		n := min(b.left, settleBatch)
		if n <= 0 {
			return s.leaveWork(ctx, tx, w, cursor, false)
		}
		children, err := tx.DependencyChildren(ctx, w.Namespace, w.Parent, cursor, n)
		if err != nil {
			return err
		}
		for _, id := range children {
			b.left--
			cursor = id
			var err error
			if w.Kind == store.DepRewait {
				err = s.rewaitChild(ctx, tx, w.Namespace, id, parent, now, b)
			} else {
				err = s.settleChild(ctx, tx, w.Namespace, id, parent, now, b)
			}
			if err != nil {
				return fmt.Errorf("settle %s after %s: %w", id, parent.ID, err)
			}
		}
		if len(children) < n {
			return s.leaveWork(ctx, tx, w, cursor, true)
		}
	}
}

// leaveWork records where a parent's settling stopped: done drops stored
// work; otherwise the work is stored (or moved) for the worker.
func (s *Service) leaveWork(ctx context.Context, tx store.Tx, w *store.DepWork, cursor string, done bool) error {
	stored := w.Seq != 0
	switch {
	case stored:
		return tx.DepWorkAdvance(ctx, w, cursor, done)
	case done:
		return nil
	}
	tx.Notify(ctx, depWorkTopic)
	return tx.DepWorkPut(ctx, &store.DepWork{Namespace: w.Namespace, Parent: w.Parent, Kind: w.Kind, After: cursor})
}

// settleChild applies a finished parent to one child: counted once (a
// parent retried and finished again is not counted twice), the child
// ready once none is left, canceled at a failed parent under "cancel".
func (s *Service) settleChild(ctx context.Context, tx store.Tx, ns, id string, parent *tessera.Task, now time.Time, b *budget) error {
	child, err := tx.TaskGet(ctx, ns, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil // purged, or its namespace is
	}
	if err != nil {
		return err
	}
	d, err := tx.DependencyGet(ctx, ns, id)
	if err != nil {
		return err
	}
	if child.State != tessera.StateWaiting || slices.Contains(d.Settled, parent.ID) {
		return nil
	}
	before := child.Copy()
	if parent.State == tessera.StateSucceeded {
		d.Settled = append(d.Settled, parent.ID)
	} else {
		parentFailed(child, d, parent, now)
	}
	d.WaitingOn = len(d.After) - len(d.Settled)
	if child.State == tessera.StateWaiting && d.WaitingOn <= 0 {
		// Claimable from now, not from when it was enqueued: a claim
		// that read its clock before this transaction did (on another
		// node, or waiting for a connection) does not take it, so no run
		// of it starts before its last parent's run ended, as the runs
		// record them.
		child.State = tessera.StateReady
		if child.RunAt.Before(now) {
			child.RunAt = now
		}
	}
	child.UpdatedAt = now
	if err := tx.TaskUpdate(ctx, before, child); err != nil {
		return err
	}
	if err := tx.DependencyPut(ctx, ns, id, d); err != nil {
		return err
	}
	return s.moved(ctx, tx, child, now, b)
}

// rewaitChild makes a child that parent's failure canceled wait again,
// parent having been retried with its dependents, and so on down.
func (s *Service) rewaitChild(ctx context.Context, tx store.Tx, ns, id string, parent *tessera.Task, now time.Time, b *budget) error {
	child, err := tx.TaskGet(ctx, ns, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	d, err := tx.DependencyGet(ctx, ns, id)
	if err != nil {
		return err
	}
	if child.State != tessera.StateCanceled || d.CanceledBy != parent.ID {
		return nil
	}
	before := child.Copy()
	rewait(child, d, parent.ID)
	child.UpdatedAt = now
	if err := tx.TaskUpdate(ctx, before, child); err != nil {
		return err
	}
	if err := tx.DependencyPut(ctx, ns, id, d); err != nil {
		return err
	}
	return s.settleFrom(ctx, tx, &store.DepWork{Namespace: ns, Parent: id, Kind: store.DepRewait}, child, now, b)
}

// rewait returns a task that parent's failure canceled to waiting: the
// parent no longer counts as finished.
func rewait(child *tessera.Task, d *tessera.Dependency, parent string) {
	d.Settled = slices.DeleteFunc(d.Settled, func(p string) bool { return p == parent })
	if d.FailedParent == parent {
		d.FailedParent = ""
	}
	d.CanceledBy = ""
	d.WaitingOn = len(d.After) - len(d.Settled)
	child.State, child.Error, child.FinishedAt, child.Attempts = tessera.StateWaiting, "", nil, 0
}

// moved wakes what a task's new state concerns: its queue's claims when it
// became claimable, its children when it finished.
func (s *Service) moved(ctx context.Context, tx store.Tx, task *tessera.Task, now time.Time, b *budget) error {
	switch {
	case task.State == tessera.StateReady && !task.RunAt.After(now):
		tx.Notify(ctx, laneTopic(task))
	case tessera.Terminal(task.State):
		return s.finished(ctx, tx, task, now, b)
	}
	return nil
}

// runDepWork settles what finishing parents left, a batch a transaction,
// until no work is left; several nodes may run it at once: each step is
// conditional on the cursor it read.
func (s *Service) runDepWork(ctx context.Context) error {
	for {
		var work []store.DepWork
		err := s.store.View(ctx, func(tx store.Tx) error {
			var err error
			work, err = tx.DepWorkList(ctx, 16)
			return err
		})
		if err != nil || len(work) == 0 {
			return err
		}
		for i := range work {
			w := work[i]
			err := s.store.Update(ctx, func(tx store.Tx) error {
				now := s.clock.Now()
				parent, err := tx.TaskGet(ctx, w.Namespace, w.Parent)
				if errors.Is(err, store.ErrNotFound) {
					return tx.DepWorkAdvance(ctx, &w, w.After, true)
				}
				if err != nil {
					return err
				}
				return s.settleFrom(ctx, tx, &w, parent, now, &budget{left: settleBatch})
			})
			if err != nil && !errors.Is(err, store.ErrStale) {
				return fmt.Errorf("dependency work on %s/%s: %w", w.Namespace, w.Parent, err)
			}
		}
	}
}

// depWorker runs the dependency work when a transaction leaves some (its
// notification, from any node), and every 10 s for what a missed
// notification or a restart left.
func (s *Service) depWorker() {
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for {
		woken, unsubscribe := s.signals.subscribe(depWorkTopic)
		select {
		case <-woken:
		case <-tick.C:
		case <-s.done:
			unsubscribe()
			return
		}
		unsubscribe()
		if err := s.runDepWork(context.Background()); err != nil {
			s.cfg.Log.Warn("dependency work failed; it is retried within 10 s", "err", err)
		}
	}
}

// Dependents returns a page of a task's children: the tasks enqueued after
// it.
func (s *Service) Dependents(ctx context.Context, a *auth.Actor, ns, id, cursor string, limit int) (*TaskPage, error) {
	a, err := s.authorize(ctx, a, ns, ActTaskDependents)
	if err != nil {
		return nil, err
	}
	after := ""
	if cursor != "" {
		if after, err = decodeCursor(cursor); err != nil {
			return nil, tessera.Invalid("cursor", "cursor is not one this server issued")
		}
	}
	if limit == 0 {
		limit = DefaultListSize
	}
	page := &TaskPage{Tasks: []tessera.Task{}}
	err = s.auditedRead(ctx, a, ns, ActTaskDependents, func(tx store.Tx, ev *tessera.AuditEvent) error {
		ev.Target = id
		if _, err := tx.TaskGet(ctx, ns, id); err != nil {
			return notFound(err, "task", id)
		}
		children, err := tx.DependencyChildren(ctx, ns, id, after, limit+1)
		if err != nil {
			return err
		}
		if len(children) > limit {
			children = children[:limit]
			page.NextCursor = encodeCursor(children[limit-1])
		}
		now := s.clock.Now()
		for _, c := range children {
			task, err := tx.TaskGet(ctx, ns, c)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if task.Dependency, err = s.dependency(ctx, tx, task); err != nil {
				return err
			}
			task.Show(now)
			page.Tasks = append(page.Tasks, *task)
		}
		return nil
	})
	return page, err
}

// ParentResult is a parent's end as a claim of its child hands it over:
// its outcome (the state it finished in: succeeded, or under
// on_parent_failure "run" dead or canceled; "purged" when retention
// deleted it since) and its result, inline up to MaxInlineParentResult
// bytes while the claim's inlined results stay within
// MaxInlineParentResults; a result past either is left out, with
// ResultOmitted set, for the holder to read with GET /v1/tasks/{task_id}.
type ParentResult struct {
	TaskID        string          `json:"task_id"`
	Outcome       string          `json:"outcome"`
	Result        json.RawMessage `json:"result,omitempty"`
	Error         string          `json:"error,omitempty"`
	ResultOmitted bool            `json:"result_omitted,omitempty"`
}

// Bounds of the parents' results a claim inlines.
const (
	MaxInlineParentResult  = 64 << 10
	MaxInlineParentResults = 1 << 20
)

// OutcomePurged is a parent retention deleted before its child's claim.
const OutcomePurged = "purged"

// parentResults reads, for a task enqueued with parent_results, its
// parents' ends: one read of its dependency and one of its parents.
func parentResults(ctx context.Context, tx store.Tx, task *tessera.Task) ([]ParentResult, error) {
	if !task.ParentResults {
		return nil, nil
	}
	d, err := tx.DependencyGet(ctx, task.Namespace, task.ID)
	if err != nil {
		return nil, fmt.Errorf("task %s parent results: %w", task.ID, err)
	}
	parents, err := tx.TaskGetMany(ctx, task.Namespace, d.After)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]*tessera.Task, len(parents))
	for i := range parents {
		byID[parents[i].ID] = &parents[i]
	}
	out := make([]ParentResult, len(d.After))
	inlined := 0
	for i, id := range d.After {
		out[i] = ParentResult{TaskID: id, Outcome: OutcomePurged}
		p := byID[id]
		if p == nil {
			continue
		}
		out[i].Outcome, out[i].Error = p.State, p.Error
		if n := len(p.Result); n > 0 {
			if n > MaxInlineParentResult || inlined+n > MaxInlineParentResults {
				out[i].ResultOmitted = true
				continue
			}
			out[i].Result, inlined = p.Result, inlined+n
		}
	}
	return out, nil
}
