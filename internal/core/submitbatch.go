package core

import (
	"context"
	"errors"
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
// cleared and the action writes no event.
func (s *Service) submitItems(ctx context.Context, tx store.Tx, ev *tessera.AuditEvent, ns string, items []SubmitItem, out *SubmitBatchResult) error {
	now := ev.Time
	out.Results = make([]SubmitResult, len(items))
	var ended []*tessera.AuditEvent
	for i, it := range items {
		res := &out.Results[i]
		res.TaskID = it.TaskID
		task, err := s.submitItem(ctx, tx, ns, it, now)
		var refused *tessera.Error
		switch {
		case errors.As(err, &refused):
			res.Error = &ItemError{Code: refused.Code, Message: refused.Message}
			continue
		case err != nil:
			return err
		}
		done := *task
		done.Show(now) // remembered as sent
		res.Task = &done
		ended = append(ended, &tessera.AuditEvent{Time: now, Namespace: ns, PrincipalID: ev.PrincipalID, KeyID: ev.KeyID,
			Action: ActSubmit, Target: task.ID, RunID: task.Run.ID, Status: 200, Public: task.Public})
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

// submitItem ends one item's run, or refuses it with a *tessera.Error
// (lease_lost, not_found): a lapse it finds is recorded all the same.
func (s *Service) submitItem(ctx context.Context, tx store.Tx, ns string, it SubmitItem, now time.Time) (*tessera.Task, error) {
	if it.LeaseToken == "" || len(it.LeaseToken) > 128 {
		return nil, tessera.ErrLeaseLost
	}
	task, err := holdLease(ctx, tx, ns, it.TaskID, it.LeaseToken, now)
	if errors.Is(err, errLapsed) {
		// The lapse is a fact, whatever the item wanted; the transaction
		// stands for the other items, so it is recorded here.
		if err := s.endLease(ctx, tx, task, now, tessera.OutcomeLapsed, "lease expired", nil); err != nil {
			return nil, err
		}
		return nil, tessera.ErrLeaseLost
	}
	if err != nil {
		return nil, err
	}
	if err := s.endLease(ctx, tx, task, now, it.Outcome, it.Error, it.Result); err != nil {
		return nil, err
	}
	if err := cooldown(ctx, tx, task, it.CooldownSeconds, now); err != nil {
		return nil, err
	}
	return task, nil
}
