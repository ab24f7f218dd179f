package core

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/ids"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// SubmitItem is one run a batch submit ends: its task, and the body a
// single submit of it would carry.
type SubmitItem struct {
	TaskID string `json:"task_id"`
	SubmitParams
}

// ItemError is why one item of a batch was refused; the batch's other
// items stand.
type ItemError struct {
	// Status is the HTTP status the code maps to (ops.Status), as the
	// error body of a single submit would carry it.
	Status  int          `json:"status"`
	Code    tessera.Code `json:"code"`
	Message string       `json:"message"`
}

// SubmitBatchParams is the body of POST /v1/claims/submit.
type SubmitBatchParams struct {
	Items []SubmitItem `json:"items"`
}

// SubmitResult is one item's outcome: the task as its submit left it, or
// why the item was refused.
type SubmitResult struct {
	TaskID string        `json:"task_id"`
	Task   *tessera.Task `json:"task,omitempty"`
	Error  *ItemError    `json:"error,omitempty"`
}

// SubmitBatchResult is a batch submit's answer: one result per item, in
// item order.
type SubmitBatchResult struct {
	Results []SubmitResult `json:"results"`
}

// SubmitBatch ends up to 100 runs in one transaction, each item fenced by
// its own lease token as Submit fences one: an item whose token is not its
// task's live lease — wrong, stale, of a run that ended — is refused alone
// with lease_lost (a lease found lapsed is recorded as lapsed, as Submit
// records it), a task that does not exist with not_found, and the other
// items stand. Every run ended is audited as a submit of its task
// (ActSubmit); a batch that ends none writes no event. A task named
// twice refuses the whole batch (invalid_request naming items[i]) before
// anything is written; a storage fault fails the whole batch, nothing of
// it written. With an Idempotency-Key a repeat of the batch answers the
// first answer (a different batch with the key is idempotency_conflict).
func (s *Service) SubmitBatch(ctx context.Context, a *auth.Actor, ns string, items []SubmitItem, idemKey string) (*SubmitBatchResult, error) {
	seen := make(map[string]bool, len(items))
	for i, it := range items {
		if seen[it.TaskID] {
			return nil, inBatch("items", i, tessera.Invalid("task_id", "task %s is named twice in the batch", it.TaskID))
		}
		seen[it.TaskID] = true
	}
	a, err := s.authorize(ctx, a, ns, ActSubmitBatch)
	if err != nil {
		return nil, err
	}
	var out SubmitBatchResult
	replayed := false
	err = s.audited(ctx, a, ns, ActSubmit, func(tx store.Tx, ev *tessera.AuditEvent) (err error) {
		e := store.Idempotency{Namespace: ns, PrincipalID: a.Principal.ID, Route: "submit_batch", Key: idemKey, CreatedAt: ev.Time}
		replayed, err = idempotent(ctx, tx, ev, e, items, &out, func() error { return s.submitItems(ctx, tx, ev, ns, items, &out) })
		return err
	})
	if err != nil {
		return nil, err
	}
	s.countReplay(replayed, a, ns, ActSubmitBatch)
	now := s.clock.Now()
	for _, r := range out.Results {
		if r.Task != nil {
			r.Task.Show(now)
		}
	}
	return &out, nil
}

// submitItems ends each item's run inside tx and fills out: a result per
// item, and a submit event per run ended — ev, which the audited action
// writes once this returns, is the last one's; with none ended ev is
// cleared and the action writes no event. The batch's tasks are read
// together, written together, and only those with children look for
// them: a batch costs a few round trips, not a few per item.
func (s *Service) submitItems(ctx context.Context, tx store.Tx, ev *tessera.AuditEvent, ns string, items []SubmitItem, out *SubmitBatchResult) error {
	now := ev.Time
	out.Results = make([]SubmitResult, len(items))
	taskIDs := make([]string, len(items))
	for i, it := range items {
		taskIDs[i] = it.TaskID
		out.Results[i].TaskID = it.TaskID
	}
	read, err := tx.TaskGetMany(ctx, ns, taskIDs)
	if err != nil {
		return err
	}
	byID := make(map[string]*tessera.Task, len(read))
	for i := range read {
		byID[read[i].ID] = &read[i]
	}
	var ends []itemEnd
	for i, it := range items {
		end, err := submitItem(it, byID[it.TaskID], now)
		var refused *tessera.Error
		switch {
		case errors.As(err, &refused):
			out.Results[i].Error = &ItemError{Code: refused.Code, Message: refused.Message}
		case err != nil:
			return err
		}
		if end != nil {
			end.item = i
			ends = append(ends, *end)
		}
	}
	if err := s.endItems(ctx, tx, ns, ends, now); err != nil {
		return err
	}
	var ended []*tessera.AuditEvent
	for _, e := range ends {
		if e.outcome == tessera.OutcomeLapsed {
			continue // refused, as lease_lost
		}
		if err := cooldown(ctx, tx, e.task, items[e.item].CooldownSeconds, now); err != nil {
			return err
		}
		done := *e.task
		done.Show(now) // remembered as sent
		out.Results[e.item].Task = &done
		ended = append(ended, &tessera.AuditEvent{Time: now, Namespace: ns, PrincipalID: ev.PrincipalID, KeyID: ev.KeyID,
			Action: ActSubmit, Target: e.task.ID, RunID: e.task.Run.ID, Status: 200, Public: e.task.Public})
	}
	if len(ended) == 0 {
		ev.Action = ""
		return nil
	}
	ipHash, _, err := s.ipHash(ctx, tx, now) // a fresh salt is remembered by act, which reads it again
	if err != nil {
		return err
	}
	for _, e := range ended[:len(ended)-1] {
		e.ID, e.IPHash = ids.New(now), ipHash
		if err := tx.AuditInsert(ctx, e); err != nil {
			return err
		}
	}
	last := ended[len(ended)-1]
	ev.Action, ev.Target, ev.RunID, ev.Public, ev.Status = last.Action, last.Target, last.RunID, last.Public, last.Status
	return nil
}

// itemEnd is the end of one item's run: its task as read and as the end
// leaves it.
type itemEnd struct {
	item         int
	before, task *tessera.Task
	outcome      string
}

// submitItem judges one item against its task as read (nil: not found):
// the run's end it makes, unwritten — the item's outcome, or the lapse
// it found, which is a fact whatever the item wanted and is written for
// the batch's sake though the item is refused (lease_lost) — and, as a
// *tessera.Error, why the item is refused.
func submitItem(it SubmitItem, read *tessera.Task, now time.Time) (*itemEnd, error) {
	if it.LeaseToken == "" || len(it.LeaseToken) > 128 {
		return nil, tessera.ErrLeaseLost
	}
	if read == nil {
		return nil, notFound(store.ErrNotFound, "task", it.TaskID)
	}
	task, err := liveLease(read, nil, it.TaskID, it.LeaseToken, now)
	outcome, errMsg, result := it.Outcome, it.Error, it.Result
	switch {
	case errors.Is(err, errLapsed):
		outcome, errMsg, result = tessera.OutcomeLapsed, "lease expired", nil
	case err != nil:
		return nil, err
	case it.CooldownSeconds != 0 && task.Group == "":
		return nil, tessera.Invalid("cooldown_seconds", "cooldown_seconds pauses the task's group, and task %s has none", task.ID)
	}
	end := &itemEnd{before: task.Copy(), task: task, outcome: outcome}
	if err := endRun(task, now, outcome, errMsg, result); err != nil {
		return nil, err
	}
	if outcome == tessera.OutcomeLapsed {
		return end, tessera.ErrLeaseLost
	}
	return end, nil
}

// endItems writes the runs' ends, and then what follows each (leaseEnded):
// the children of those that finished are settled, for those that have any.
func (s *Service) endItems(ctx context.Context, tx store.Tx, ns string, ends []itemEnd, now time.Time) error {
	if len(ends) == 0 {
		return nil
	}
	changes := make([]store.TaskChange, len(ends))
	var finished []string
	for i, e := range ends {
		changes[i] = store.TaskChange{Before: e.before, After: e.task}
		if tessera.Terminal(e.task.State) {
			finished = append(finished, e.task.ID)
		}
	}
	if err := tx.TaskUpdateMany(ctx, changes); err != nil {
		return err
	}
	var parents []string
	if len(finished) > 0 {
		var err error
		if parents, err = tx.DependencyParents(ctx, ns, finished); err != nil {
			return err
		}
	}
	for _, e := range ends {
		if err := s.leaseEnded(ctx, tx, e.before, e.task, now, e.outcome, slices.Contains(parents, e.task.ID)); err != nil {
			return err
		}
	}
	return nil
}
