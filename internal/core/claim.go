package core

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/ids"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// Claim bounds (SPEC §3.5).
const (
	DefaultLeaseSeconds = 300
	MinLeaseSeconds     = 10
	MaxLeaseSeconds     = 3600
	MaxClaimWait        = 20
	MaxEventsWait       = 30
	// lapseBatch bounds the lapsed leases one claim cleans up, so a claim
	// after a mass expiry stays a short transaction.
	lapseBatch = 32
	eventsPage = 100
)

// MaxClaimBatch bounds a batch claim's Max and a batch submit's items.
const MaxClaimBatch = 100

// ClaimParams is the body of POST /v1/claims.
type ClaimParams struct {
	Queue        string `json:"queue,omitempty"`
	LeaseSeconds int    `json:"lease_seconds,omitempty"`
	WaitSeconds  int    `json:"wait_seconds,omitempty"`
	// Capabilities are what the claimant has: only tasks whose requires
	// are all among them are granted (fleet.go).
	Capabilities []string `json:"capabilities,omitempty"`
}

// ClaimBatchParams is the body of POST /v1/claims/batch: a claim of up to
// Max leases (1–100; 0: 1).
type ClaimBatchParams struct {
	ClaimParams
	Max int `json:"max,omitempty"`
}

// Claimed is a claim's answer: a lease and its task, or no lease and the
// advised wait before the next poll.
type Claimed struct {
	Lease      *tessera.Lease `json:"lease"`
	Task       *tessera.Task  `json:"task,omitempty"`
	RetryAfter int            `json:"retry_after,omitempty"`
	// QueueKnown, on an empty answer, says whether the queue has ever had
	// a task in the namespace: false is the tell of a misspelled queue or
	// namespace.
	QueueKnown *bool `json:"queue_known,omitempty"`
	// PreviousCheckpoint is what an earlier attempt at the task left to
	// resume from.
	PreviousCheckpoint *tessera.Checkpoint `json:"previous_checkpoint,omitempty"`
	// GateAnswers are the answers to the task's gates, by key, for a
	// task that was gated (gate.go).
	GateAnswers map[string]*tessera.GateAnswer `json:"gate_answers,omitempty"`
	// Parents are the outcomes and results of the tasks this one was
	// enqueued after, in its after's order, for a task enqueued with
	// parent_results (deps.go).
	Parents []ParentResult `json:"parents,omitempty"`
	// QueuePaused, on an empty answer, says the queue is paused: nothing
	// is granted until it is resumed.
	QueuePaused bool `json:"queue_paused,omitempty"`
	// UncoveredRequires, on an empty answer, is what a task ready now in
	// the queue requires that the claim's capabilities lack: work is
	// there, but not for this claimant.
	UncoveredRequires []string `json:"uncovered_requires,omitempty"`
}

// leaseSeconds is a lease's length: v, or the default for 0.
func leaseSeconds(v int) int {
	if v == 0 {
		return DefaultLeaseSeconds
	}
	return v
}

func hashToken(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// Claim grants the next ready task of a queue, waiting up to WaitSeconds
// for one to arrive. Admission (§6) bounds each key's claims.
func (s *Service) Claim(ctx context.Context, a *auth.Actor, ns string, p ClaimParams) (*Claimed, error) {
	claims, empty, err := s.claim(ctx, a, ns, p, ActClaim, 1)
	if err != nil || len(claims) == 0 {
		return empty, err
	}
	return &claims[0], nil
}

// ClaimedBatch is a batch claim's answer: the leases granted with their
// tasks, in claim order, or none and the advised wait before the next
// poll (with what an empty claim says of its queue).
type ClaimedBatch struct {
	Claims            []Claimed `json:"claims"`
	RetryAfter        int       `json:"retry_after,omitempty"`
	QueueKnown        *bool     `json:"queue_known,omitempty"`
	QueuePaused       bool      `json:"queue_paused,omitempty"`
	UncoveredRequires []string  `json:"uncovered_requires,omitempty"`
}

// ClaimN grants up to p.Max (1–100; 0 means 1) ready tasks of a queue in
// one transaction, each with a lease of its own — its own run and token —
// exactly as that many single claims one after another would grant them:
// in claim order (highest priority, then oldest run_at, then id), lapsed
// leases of the queue noticed first, every task granted audited as a
// claim of it (ActClaim), the key's empty-claim hint reset. It waits up to
// WaitSeconds for at least one task to be ready and answers as soon as one
// is: it never waits to fill Max. Admission (§6) counts a batch as one
// claim. A batch granting none is counted (ActClaimBatch, empty) and
// advises RetryAfter, as an empty claim does.
func (s *Service) ClaimN(ctx context.Context, a *auth.Actor, ns string, p ClaimBatchParams) (*ClaimedBatch, error) {
	claims, empty, err := s.claim(ctx, a, ns, p.ClaimParams, ActClaimBatch, max(p.Max, 1))
	if err != nil {
		return nil, err
	}
	if len(claims) == 0 {
		return &ClaimedBatch{Claims: []Claimed{}, RetryAfter: empty.RetryAfter, QueueKnown: empty.QueueKnown, QueuePaused: empty.QueuePaused,
			UncoveredRequires: empty.UncoveredRequires}, nil
	}
	return &ClaimedBatch{Claims: claims}, nil
}

// claim is Claim and ClaimN: it authorizes op, takes one admission, and
// grants up to max leases, waiting for the first; with none granted it
// counts op as empty and answers what an empty claim says.
func (s *Service) claim(ctx context.Context, a *auth.Actor, ns string, p ClaimParams, op string, max int) ([]Claimed, *Claimed, error) {
	if p.Queue == "" {
		p.Queue = DefaultQueue
	}
	ls := leaseSeconds(p.LeaseSeconds)
	caps := canonical(p.Capabilities)
	a, err := s.authorize(ctx, a, ns, op)
	if err != nil {
		return nil, nil, err
	}
	release, err := s.admission.admit(ctx, a.Key.ID)
	if err != nil {
		return nil, nil, err
	}
	defer release()

	topic := queueTopic(ns, p.Queue)
	deadline := time.Now().Add(time.Duration(p.WaitSeconds) * time.Second)
	for {
		// Checked again after admission and after every wait (§4): a key
		// revoked while it waited gets 401 and the task stays ready.
		if a, err = s.authorize(ctx, a, ns, op); err != nil {
			return nil, nil, err
		}
		woken, unsubscribe := s.signals.subscribeCapable(topic, caps)
		claimed, limit, err := s.tryClaim(ctx, a, ns, p.Queue, caps, ls, max)
		if err != nil || len(claimed) > 0 {
			unsubscribe()
			if len(claimed) > 0 {
				s.hints.granted(a.Key.ID)
			}
			return claimed, nil, err
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			unsubscribe()
			s.Count(a.Principal.ID, ns, op, OutcomeEmpty)
			known := s.queueKnown(ctx, ns, p.Queue)
			retry := s.hints.empty(a.Key.ID, topic, s.clock.Now())
			if limit > 0 {
				// A rate or a cooldown held work back: the hint is when it
				// lifts.
				retry = int(math.Ceil(limit.Seconds()))
			}
			empty := &Claimed{RetryAfter: retry, QueueKnown: &known, QueuePaused: s.pauses.has(ns, p.Queue)}
			if known && !empty.QueuePaused {
				empty.UncoveredRequires = s.uncoveredRequires(ctx, ns, p.Queue, caps)
			}
			return nil, empty, nil
		}
		if limit > 0 {
			wait = min(wait, limit)
		}
		timer := time.NewTimer(s.pollWait(wait))
		waited := waitSpan(ctx, "claim.wait")
		select {
		case <-woken:
		case <-timer.C:
		case <-ctx.Done():
		case <-s.done:
		}
		timer.Stop()
		waited()
		unsubscribe()
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		select {
		case <-s.done:
			deadline = time.Now() // one last look, then answer empty
		default:
		}
	}
}

// deafPoll is how long a long-poll sleeps at a time while the store's
// listener is unhealthy.
const deafPoll = time.Second

// pollWait is how long a long-poll with left to wait sleeps before it
// looks again: all of it, to be woken by a signal, unless the store may
// not hear other nodes' signals now (a listener found silent or down) —
// then it looks again every deafPoll, so none sleeps past a task that
// another node made ready.
func (s *Service) pollWait(left time.Duration) time.Duration {
	if l, ok := s.StoreListener(); ok && !l.Healthy {
		return min(left, deafPoll)
	}
	return left
}

// tryClaim grants up to max leases of a queue in one transaction, after
// noticing its lapsed leases; each task granted gets a claim event (the
// audited action's own event is the last one's). With fewer granted than
// max for a limit (a rate, a cooldown), it says how long until it lifts.
func (s *Service) tryClaim(ctx context.Context, a *auth.Actor, ns, queue string, caps []string, ls, max int) ([]Claimed, time.Duration, error) {
	var out []Claimed
	var limit time.Duration
	err := s.audited(ctx, a, ns, ActClaim, func(tx store.Tx, ev *tessera.AuditEvent) error {
		ev.Action, out, limit = "", nil, 0 // until a task is granted: lapses alone are no event
		now := ev.Time
		if err := s.lapse(ctx, tx, ns, queue, now); err != nil {
			return err
		}
		if paused, err := s.queuePaused(ctx, tx, ns, queue); err != nil || paused {
			return err // a paused queue grants nothing; its lapses still end
		}
		if s.meter.WriteRefusal() != nil {
			// The claim is a write, refused while the allowance is spent;
			// reads are not, and an empty queue still answers empty.
			ready, err := tx.TaskOldestReady(ctx, ns, []string{queue}, now, store.AllTasks)
			if err != nil || len(ready) == 0 {
				return err
			}
		}
		lease := tessera.Lease{Holder: a.Principal.ID, ExpiresAt: now.Add(time.Duration(ls) * time.Second), Seconds: ls}
		secrets := map[string]string{} // by run id
		var tasks []tessera.Task
		fleet, err := s.fleetQueue(ctx, tx, ns, queue)
		if err != nil {
			return err
		}
		if fleet || len(caps) > 0 {
			if err := s.seenClaimant(ctx, tx, ns, queue, caps, now); err != nil {
				return err
			}
		}
		// Each lease its own run and token; only the secret's hash is stored.
		runs := make([]store.LeaseRun, max)
		for i := range runs {
			secret := tessera.RandomToken(24)
			runs[i] = store.LeaseRun{RunID: ids.New(now), TokenHash: hashToken(secret)}
			secrets[runs[i].RunID] = secret
		}
		switch {
		case fleet:
			c := fleetClaim{ns: ns, queue: queue, caps: caps, lease: lease, now: now}
			if tasks, limit, err = s.claimLanes(ctx, tx, c, runs); err != nil || len(tasks) == 0 {
				return err
			}
		case max == 1:
			lease.RunID, lease.TokenHash = runs[0].RunID, runs[0].TokenHash
			task, err := tx.TaskClaim(ctx, store.TaskClaim{Namespace: ns, Queue: queue, Now: now, Lease: lease})
			if errors.Is(err, store.ErrNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			tasks = []tessera.Task{*task}
		default:
			p := store.TaskClaimMany{Namespace: ns, Queue: queue, Now: now, Lease: lease, Runs: runs}
			if tasks, err = tx.TaskClaimMany(ctx, p); err != nil || len(tasks) == 0 {
				return err
			}
		}
		var ipHash string
		if len(tasks) > 1 {
			var err error
			if ipHash, _, err = s.ipHash(ctx, tx, now); err != nil { // a fresh salt is remembered by act, which reads it again
				return err
			}
		}
		out = make([]Claimed, len(tasks))
		for i := range tasks {
			task := &tasks[i]
			l := *task.Lease
			l.Token = leaseToken(task.ID, secrets[l.RunID])
			out[i] = Claimed{Lease: &l, Task: task}
			if task.Attempts > 1 || task.GateCount > 0 {
				// An earlier attempt, or a run that parked the task on
				// gates, may have left where it got to.
				switch c, err := tx.CheckpointGet(ctx, ns, task.ID); {
				case err == nil:
					out[i].PreviousCheckpoint = c
				case !errors.Is(err, store.ErrNotFound):
					return err
				}
			}
			if out[i].GateAnswers, err = gateAnswers(ctx, tx, task); err != nil {
				return err
			}
			if out[i].Parents, err = parentResults(ctx, tx, task); err != nil {
				return err
			}
			// Each task granted is a claim of it; the audited action's own
			// event, written once this returns, is the last one's.
			te := ev
			if i < len(tasks)-1 {
				te = &tessera.AuditEvent{ID: ids.New(now), Time: now, Namespace: ns, PrincipalID: ev.PrincipalID, KeyID: ev.KeyID,
					IPHash: ipHash, Status: 200}
			}
			te.Action, te.Target, te.RunID, te.Public = ActClaim, task.ID, l.RunID, task.Public
			if te != ev {
				if err := tx.AuditInsert(ctx, te); err != nil {
					return err
				}
			}
		}
		return nil
	})
	return out, limit, err
}

// lapse ends, inside tx, the leases of a queue that expired by now (at
// most lapseBatch, found through the lease index), so their tasks become
// claimable again or die. A lease someone else ended meanwhile is skipped.
func (s *Service) lapse(ctx context.Context, tx store.Tx, ns, queue string, now time.Time) error {
	lapsed, err := tx.TaskLapsed(ctx, ns, queue, now, lapseBatch)
	if err != nil {
		return err
	}
	for i := range lapsed {
		err := s.endLease(ctx, tx, &lapsed[i], now, tessera.OutcomeLapsed, "lease expired", nil)
		if err != nil && !errors.Is(err, store.ErrStale) {
			return err
		}
	}
	return nil
}

// endLease ends the task's current run with outcome and moves the task on,
// written over the version the task was read at: a requested cancel wins;
// success ends it; a release gives back the attempt; a failure or lapse
// backs off, or kills the task when attempts are spent. The holder hears
// of a lapse, and a task that became claimable wakes its queue's claims.
func (s *Service) endLease(ctx context.Context, tx store.Tx, task *tessera.Task, now time.Time, outcome, errMsg string, result json.RawMessage) error {
	return s.endLeaseFrom(ctx, tx, task.Copy(), task, now, outcome, errMsg, result)
}

// endLeaseFrom is endLease for a task the caller changed since it was
// read (before): the change is written with the run's end.
func (s *Service) endLeaseFrom(ctx context.Context, tx store.Tx, before, task *tessera.Task, now time.Time, outcome, errMsg string, result json.RawMessage) error {
	if err := endRun(task, now, outcome, errMsg, result); err != nil {
		return err
	}
	if err := tx.TaskUpdate(ctx, before, task); err != nil {
		return err
	}
	return s.leaseEnded(ctx, tx, before, task, now, outcome, true)
}

// endRun ends the task's current run with outcome and moves the task on,
// unwritten; see endLease.
func endRun(task *tessera.Task, now time.Time, outcome, errMsg string, result json.RawMessage) error {
	if task.Run == nil || task.Run.ID != task.Lease.RunID {
		return fmt.Errorf("task %s: its lease's run %s is not the run on its row", task.ID, task.Lease.RunID)
	}
	// The run ends on the task's row, in the same write as the task.
	task.Run.EndedAt, task.Run.Outcome, task.Run.Error = &now, outcome, errMsg
	switch {
	case task.CancelRequested:
		task.State = tessera.StateCanceled
	case outcome == tessera.OutcomeSucceeded:
		task.State = tessera.StateSucceeded
	case outcome == tessera.OutcomeReleased:
		task.State = tessera.StateReady
		task.Attempts--
	case outcome == tessera.OutcomeGated:
		task.State = tessera.StateGated
		task.Attempts--
	case task.Attempts >= task.MaxAttempts:
		task.State = tessera.StateDead
	default:
		task.State = tessera.StateReady
		task.RunAt = now.Add(jitter(tessera.Backoff(task.Attempts))).Truncate(time.Millisecond)
	}
	if tessera.Terminal(task.State) {
		task.FinishedAt = &now
	}
	task.Result, task.Error = nullToNil(result), errMsg
	task.Lease = nil
	task.UpdatedAt = now
	return nil
}

// leaseEnded is what follows the written end of a run (endRun): a task
// that finished settles its children, unless the caller knows it has none
// (parent false); the holder hears of a lapse; and a task that became
// claimable, or freed a slot of its group, wakes its queue's claims.
func (s *Service) leaseEnded(ctx context.Context, tx store.Tx, before, task *tessera.Task, now time.Time, outcome string, parent bool) error {
	if parent && tessera.Terminal(task.State) {
		// Only a live lease's end gets here: a stale holder's late submit
		// is lease_lost, and settles no dependent.
		if err := s.finished(ctx, tx, task, now, &budget{left: settleBatch}); err != nil {
			return err
		}
	}
	if outcome == tessera.OutcomeLapsed {
		if err := tx.TaskEventAppend(ctx, task.Namespace, task.ID, &tessera.TaskEvent{Kind: tessera.EventLeaseEnded, Body: "lease expired", Time: now}); err != nil {
			return err
		}
		if err := auditLapse(ctx, tx, task, before.Lease.Holder, before.Lease.RunID, now); err != nil {
			return err
		}
		tx.Notify(ctx, taskTopic(task.Namespace, task.ID))
	}
	switch {
	case task.State == tessera.StateReady && !task.RunAt.After(now):
		tx.Notify(ctx, laneTopic(task))
	case task.Group != "":
		// A slot of its group freed: claims that its cap held back look
		// again.
		tx.Notify(ctx, queueTopic(task.Namespace, task.Queue))
	}
	return nil
}

// jitter adds up to 10 % to d, so retries of tasks that failed together
// spread out.
func jitter(d time.Duration) time.Duration {
	return d + rand.N(d/10+1)
}

// errLapsed marks a lease found expired inside a transaction that must roll
// back; the lapse itself is then committed on its own.
var errLapsed = errors.New("lease lapsed")

// holdLease returns the task if token is its live lease. A matching but
// expired lease yields the task with errLapsed; anything else is lease_lost.
func holdLease(ctx context.Context, tx store.Tx, ns, id, token string, now time.Time) (*tessera.Task, error) {
	task, err := tx.TaskGet(ctx, ns, id)
	return liveLease(task, err, id, token, now)
}

// liveLease is holdLease's judgement of the task as read (or its error).
func liveLease(task *tessera.Task, err error, id, token string, now time.Time) (*tessera.Task, error) {
	if err != nil {
		return nil, notFound(err, "task", id)
	}
	if task.State != tessera.StateLeased || task.Lease == nil || !tokenMatches(token, task) {
		return nil, whyLost(task, token, now)
	}
	if !now.Before(task.Lease.ExpiresAt) {
		return task, errLapsed
	}
	return task, nil
}

// whyLost is lease_lost for a token that is not task's live lease, saying
// why, so a worker knows whether its work was already accepted: the token
// names another task; the task finished (submitted, canceled or dead);
// another run holds it (this one lapsed and it was granted again); or it
// waits in its queue again (lapsed or released).
func whyLost(task *tessera.Task, token string, now time.Time) *tessera.Error {
	id, _, _ := strings.Cut(token, ".")
	var why string
	switch state := task.VisibleState(now); {
	case id != task.ID:
		why = "this lease token is not of task " + task.ID
	case tessera.Terminal(state):
		why = "task " + task.ID + " is already " + state + ": the run this token held has ended"
	case state == tessera.StateLeased:
		why = "task " + task.ID + " is held by another run: this token's lease lapsed and the task was granted again"
	default:
		why = "task " + task.ID + " is " + state + " again: this token's lease lapsed or was released"
	}
	return &tessera.Error{Code: tessera.CodeLeaseLost, Message: why}
}

// errLapsedLease is lease_lost for a lease found expired by the request
// that presented it.
var errLapsedLease = &tessera.Error{Code: tessera.CodeLeaseLost,
	Message: "the lease expired before this request: the task goes back to its queue, or dies when its attempts are spent"}

// withLease runs fn on a task whose live lease token is given. When the
// lease turns out to have lapsed, the lapse is recorded and the caller gets
// lease_lost: the lapse is a fact, whatever the request wanted.
func (s *Service) withLease(ctx context.Context, a *auth.Actor, ns, id, token, action string, fn func(tx store.Tx, task *tessera.Task, now time.Time) error) error {
	if token == "" || len(token) > MaxLeaseTokenLen {
		return tessera.ErrLeaseLost
	}
	err := s.audited(ctx, a, ns, action, func(tx store.Tx, ev *tessera.AuditEvent) error {
		task, err := holdLease(ctx, tx, ns, id, token, ev.Time)
		if err != nil {
			return err
		}
		ev.Target, ev.RunID = id, task.Lease.RunID
		return fn(tx, task, ev.Time)
	})
	return s.noticeLapse(ctx, ns, token, err)
}

// noticeLapse passes err through unless it is errLapsed: then a
// transaction found the lease token expired and rolled back, and the lapse
// is recorded in a transaction of its own (unless someone noticed first)
// and answered as lease_lost — the lapse is a fact, whatever the request
// wanted.
func (s *Service) noticeLapse(ctx context.Context, ns, token string, err error) error {
	if !errors.Is(err, errLapsed) {
		return err
	}
	id, _ := leaseTaskID(token)
	err = s.store.Update(ctx, func(tx store.Tx) error {
		now := s.clock.Now()
		task, err := holdLease(ctx, tx, ns, id, token, now)
		if !errors.Is(err, errLapsed) {
			return nil // someone else noticed first
		}
		return s.endLease(ctx, tx, task, now, tessera.OutcomeLapsed, "lease expired", nil)
	})
	if err != nil {
		return err
	}
	return errLapsedLease
}

// A lease token is "<task id>.<secret>": the task id lets a write that
// carries only the token (a record or blob written under a lease) find its
// task by primary key. Only a hash of the secret is stored, so the claim
// can write it in the same statement that picks the task.
func leaseToken(taskID, secret string) string { return taskID + "." + secret }

// tokenMatches reports whether token is the task's lease exactly as it
// was issued: the task's own id, a dot, and the secret whose hash the
// lease holds. A token is a fencing token, so nothing else passes — not a
// prefixed copy, nor another task's id before this secret. (Leases granted
// by development builds before the secret alone was hashed are not
// recognized: none was ever released, and such a holder gets lease_lost
// and its task lapses back to its queue.)
func tokenMatches(token string, task *tessera.Task) bool {
	id, secret, ok := strings.Cut(token, ".")
	return ok && id == task.ID && subtle.ConstantTimeCompare(hashToken(secret), task.Lease.TokenHash) == 1
}

// leaseTaskID returns the task id a lease token names.
func leaseTaskID(token string) (string, bool) {
	id, _, ok := strings.Cut(token, ".")
	return id, ok && id != "" && len(token) <= MaxLeaseTokenLen
}

// leaseByToken is holdLease for a token alone: the task it names, if the
// token is that task's live lease. A token naming no task is lease_lost.
// It binds a write to the lease's run without writing the task, so the
// task is held (store.Tx.TaskHold) until the write commits.
func leaseByToken(ctx context.Context, tx store.Tx, ns, token string, now time.Time) (*tessera.Task, error) {
	id, ok := leaseTaskID(token)
	if !ok {
		return nil, tessera.ErrLeaseLost
	}
	held, err := tx.TaskHold(ctx, ns, id)
	task, err := liveLease(held, err, id, token, now)
	if tessera.ErrorCode(err) == tessera.CodeNotFound {
		return nil, tessera.ErrLeaseLost
	}
	return task, err
}

// HeartbeatParams is the body of a heartbeat.
type HeartbeatParams struct {
	LeaseToken   string          `json:"lease_token"`
	LeaseSeconds int             `json:"lease_seconds,omitempty"`
	Progress     json.RawMessage `json:"progress,omitempty"`
	// Checkpoint is what the run has done so far, for the next attempt
	// to resume from if this one does not finish.
	Checkpoint json.RawMessage `json:"checkpoint,omitempty"`
}

// Heartbeat is a heartbeat's answer. After a requested cancel the task is
// canceled, the lease is over and ExpiresAt is nil.
type Heartbeat struct {
	TaskID          string     `json:"task_id"`
	State           string     `json:"state"`
	ExpiresAt       *time.Time `json:"expires_at"`
	CancelRequested bool       `json:"cancel_requested"`
}

// Heartbeat extends a live lease by its length (or LeaseSeconds).
func (s *Service) Heartbeat(ctx context.Context, a *auth.Actor, ns, id string, p HeartbeatParams) (*Heartbeat, error) {
	a, err := s.authorize(ctx, a, ns, ActHeartbeat)
	if err != nil {
		return nil, err
	}
	var out Heartbeat
	err = s.withLease(ctx, a, ns, id, p.LeaseToken, ActHeartbeat, func(tx store.Tx, task *tessera.Task, now time.Time) error {
		out = Heartbeat{TaskID: id, CancelRequested: task.CancelRequested}
		if task.CancelRequested {
			out.State = tessera.StateCanceled
			return s.endLease(ctx, tx, task, now, tessera.OutcomeCanceled, "canceled by request", nil)
		}
		before := task.Copy()
		if p.LeaseSeconds != 0 {
			task.Lease.Seconds = p.LeaseSeconds
		}
		if p.Progress != nil {
			task.Progress = nullToNil(p.Progress)
		}
		if p.Checkpoint != nil {
			// Written with the heartbeat, last one wins: the next attempt
			// resumes from it (Claimed.PreviousCheckpoint).
			c := &tessera.Checkpoint{Value: p.Checkpoint, Attempt: task.Attempts, RunID: task.Lease.RunID, At: now}
			if err := tx.CheckpointPut(ctx, ns, id, c); err != nil {
				return err
			}
		}
		expires := now.Add(time.Duration(task.Lease.Seconds) * time.Second)
		task.Lease.ExpiresAt, task.UpdatedAt = expires, now
		out.State, out.ExpiresAt = task.State, &expires
		return tx.TaskUpdate(ctx, before, task)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// SubmitParams is the body of a submit.
type SubmitParams struct {
	LeaseToken string          `json:"lease_token"`
	Outcome    string          `json:"outcome"`
	Result     json.RawMessage `json:"result,omitempty"`
	Error      string          `json:"error,omitempty"`
	// CooldownSeconds pauses the task's group this long (fleet.go).
	CooldownSeconds int `json:"cooldown_seconds,omitempty"`
}

// Submit ends a run with its outcome.
func (s *Service) Submit(ctx context.Context, a *auth.Actor, ns, id string, p SubmitParams, idemKey string) (*tessera.Task, error) {
	a, err := s.authorize(ctx, a, ns, ActSubmit)
	if err != nil {
		return nil, err
	}
	var out tessera.Task
	route := "submit:" + id
	replayed := false
	err = s.audited(ctx, a, ns, ActSubmit, func(tx store.Tx, ev *tessera.AuditEvent) (err error) {
		ev.Target = id
		now := ev.Time
		e := store.Idempotency{Namespace: ns, PrincipalID: a.Principal.ID, Route: route, Key: idemKey, CreatedAt: now}
		replayed, err = idempotent(ctx, tx, ev, e, p, &out, func() error {
			task, err := holdLease(ctx, tx, ns, id, p.LeaseToken, now)
			if err != nil {
				return err
			}
			ev.RunID, ev.Public = task.Lease.RunID, task.Public
			if err := s.endLease(ctx, tx, task, now, p.Outcome, p.Error, p.Result); err != nil {
				return err
			}
			if err := cooldown(ctx, tx, task, p.CooldownSeconds, now); err != nil {
				return err
			}
			out = *task
			out.Show(now) // remembered as sent
			return nil
		})
		return err
	})
	if err = s.noticeLapse(ctx, ns, p.LeaseToken, err); err != nil {
		return nil, err
	}
	s.countReplay(replayed, a, ns, ActSubmit)
	out.Show(s.clock.Now())
	return &out, nil
}

// ReleaseParams is the body of a release.
type ReleaseParams struct {
	LeaseToken      string `json:"lease_token"`
	CooldownSeconds int    `json:"cooldown_seconds,omitempty"`
}

// Release gives a leased task back to its queue without using an attempt.
func (s *Service) Release(ctx context.Context, a *auth.Actor, ns, id string, p ReleaseParams) (*tessera.Task, error) {
	a, err := s.authorize(ctx, a, ns, ActRelease)
	if err != nil {
		return nil, err
	}
	var out *tessera.Task
	err = s.withLease(ctx, a, ns, id, p.LeaseToken, ActRelease, func(tx store.Tx, task *tessera.Task, now time.Time) error {
		out = task
		if err := s.endLease(ctx, tx, task, now, tessera.OutcomeReleased, "", nil); err != nil {
			return err
		}
		return cooldown(ctx, tx, task, p.CooldownSeconds, now)
	})
	if err != nil {
		return nil, err
	}
	out.Show(s.clock.Now())
	return out, nil
}

// ClaimEvents is the answer of the claim-events long-poll: events after the
// cursor, and the task's lease as it stands now.
type ClaimEvents struct {
	Events          []tessera.TaskEvent `json:"events"`
	NextSince       int64               `json:"next_since"`
	State           string              `json:"state"`
	CancelRequested bool                `json:"cancel_requested"`
	Lease           *tessera.Lease      `json:"lease"`
}

// Events returns what the holder of a task's lease should learn after
// sequence since, waiting up to wait for something to arrive.
func (s *Service) Events(ctx context.Context, a *auth.Actor, ns, id string, since int64, wait time.Duration) (*ClaimEvents, error) {
	deadline := time.Now().Add(wait)
	topic := taskTopic(ns, id)
	for {
		var err error
		if a, err = s.authorize(ctx, a, ns, ActClaimEvents); err != nil {
			return nil, err
		}
		woken, unsubscribe := s.signals.subscribe(topic)
		out, err := s.readEvents(ctx, a, ns, id, since)
		left := time.Until(deadline)
		if err != nil || len(out.Events) > 0 || left <= 0 {
			unsubscribe()
			if err != nil {
				return nil, err
			}
			return out, s.auditEvents(ctx, a, ns, id, wait, out)
		}
		timer := time.NewTimer(s.pollWait(left))
		waited := waitSpan(ctx, "claim.events.wait")
		select {
		case <-woken:
		case <-timer.C:
		case <-ctx.Done():
		case <-s.done:
			deadline = time.Now()
		}
		timer.Stop()
		waited()
		unsubscribe()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
}

// auditEvents records one claim-events request, however many looks it
// took: an event when it returned something or did not wait, a counter
// when its wait ran out empty.
func (s *Service) auditEvents(ctx context.Context, a *auth.Actor, ns, id string, wait time.Duration, out *ClaimEvents) error {
	if wait > 0 && len(out.Events) == 0 {
		s.Count(a.Principal.ID, ns, ActClaimEvents, OutcomeTimeout)
		return nil
	}
	return s.audited(ctx, a, ns, ActClaimEvents, func(tx store.Tx, ev *tessera.AuditEvent) error {
		ev.Target = id
		if out.Lease != nil {
			ev.RunID = out.Lease.RunID
		}
		return nil
	})
}

func (s *Service) readEvents(ctx context.Context, a *auth.Actor, ns, id string, since int64) (*ClaimEvents, error) {
	out := &ClaimEvents{NextSince: since}
	err := s.store.View(ctx, func(tx store.Tx) error {
		task, err := tx.TaskGet(ctx, ns, id)
		if err != nil {
			return notFound(err, "task", id)
		}
		if !a.Scopes().Admin() && !heldBy(task, a.Principal.ID) {
			return tessera.Errorf(tessera.CodeForbidden, "claim events are for the task's lease holder")
		}
		out.State = task.VisibleState(s.clock.Now())
		out.CancelRequested = task.CancelRequested
		out.Lease = task.Lease
		if out.Events, err = tx.TaskEventList(ctx, ns, id, since, eventsPage); err != nil {
			return err
		}
		if n := len(out.Events); n > 0 {
			out.NextSince = out.Events[n-1].Seq
		}
		return nil
	})
	if out.Events == nil {
		out.Events = []tessera.TaskEvent{}
	}
	return out, err
}

// heldBy reports whether principal holds the task's lease or, once the lease
// is over, held its last run: the holder may still read how it ended.
func heldBy(task *tessera.Task, principal string) bool {
	if task.Lease != nil {
		return task.Lease.Holder == principal
	}
	return task.Run != nil && task.Run.Holder == principal
}
