package core

import (
	"context"
	"time"

	"github.com/tessera-dev/tessera/internal/ids"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// Events are the audit trail read forward (store.ConsoleTx): each
// successful action that changes a task, a queue, a record or a blob is
// an event of the live stream (stream.go) and of a task's trail. The audit
// row already says what was done to what, by whom and when, in the
// transaction that did it; it also carries the task's queue and the state
// the action left it in (watchedTx.AuditInsert fills them in), so an event
// needs no read of the task.

// Event kinds: what a consumer of the stream switches on (the SSE event
// field). The action is there too, for the detail a kind folds.
const (
	KindEnqueued        = "task.enqueued"
	KindClaimed         = "task.claimed"
	KindHeartbeat       = "task.heartbeat"
	KindSucceeded       = "task.succeeded"
	KindFailed          = "task.failed" // a failed run or lapsed lease, with attempts left
	KindDead            = "task.dead"
	KindCanceled        = "task.canceled"
	KindCancelRequested = "task.cancel_requested"
	KindReleased        = "task.released"
	KindGated           = "task.gated"
	KindGateAnswered    = "task.gate_answered"
	KindGateTimedOut    = "task.gate_timed_out"
	KindPaused          = "task.paused"
	KindResumed         = "task.resumed"
	KindRetried         = "task.retried"
	KindQueuePaused     = "queue.paused"
	KindQueueResumed    = "queue.resumed"
	KindQueuePurged     = "queue.purged"
	KindRecordWritten   = "record.written"
	KindBlobStored      = "blob.stored"
)

// streamActions are the actions whose events the stream carries: changes,
// never reads.
var streamActions = []string{ActTaskEnqueue, ActClaim, ActHeartbeat, ActSubmit, ActRelease, ActTaskLapse,
	ActGateOpen, ActGateAnswer, ActGateTimeout,
	ActTaskCancel, ActTaskPause, ActTaskResume, ActTaskRetry, ActQueuePause, ActQueueResume, ActQueuePurge,
	ActRecordWrite, ActBlobCommit}

// Event is one event of the stream: what happened (Kind, and the Action
// behind it), to which task, queue, record or blob, and the state it left
// the task in.
type Event struct {
	// ID orders the events of a namespace; the stream sends it as the SSE
	// id, which Last-Event-ID resumes after.
	ID        string    `json:"id"`
	Kind      string    `json:"kind"`
	Action    string    `json:"action"`
	Time      time.Time `json:"time"`
	Namespace string    `json:"namespace"`
	// Target is what the action was about: a task id, bucket/key of a
	// record, sha256:<hex> of a blob, or a queue's name.
	Target string `json:"target"`
	// TaskID is the task the event is about or was done under (a record
	// written under its lease); Queue its queue (or the queue paused,
	// resumed or purged); State the state the action left the task in.
	TaskID string `json:"task_id,omitempty"`
	Queue  string `json:"queue,omitempty"`
	State  string `json:"state,omitempty"`
	RunID  string `json:"run_id,omitempty"`
	Title  string `json:"title,omitempty"`
	// By is the acting principal's id; absent on the public stream.
	By string `json:"by,omitempty"`
}

// eventOf is the event of an audit row as the stream read it.
func eventOf(e *store.StreamEvent, public bool) Event {
	ev := Event{ID: e.ID, Kind: eventKind(e.Action, e.State), Action: e.Action, Time: e.Time, Namespace: e.Namespace,
		Target: e.Target, TaskID: e.TaskID, Queue: e.Queue, State: e.State, RunID: e.RunID, Title: e.Title}
	if !public {
		ev.By = e.PrincipalID
	}
	return ev
}

// eventKind names what an action that left its task in state did.
func eventKind(action, state string) string {
	switch action {
	case ActTaskEnqueue:
		return KindEnqueued
	case ActClaim:
		return KindClaimed
	case ActHeartbeat:
		if state == tessera.StateCanceled {
			return KindCanceled // the heartbeat that learned of a cancel ends the run
		}
		return KindHeartbeat
	case ActSubmit, ActTaskLapse:
		switch state {
		case tessera.StateSucceeded:
			return KindSucceeded
		case tessera.StateDead:
			return KindDead
		case tessera.StateCanceled:
			return KindCanceled
		}
		return KindFailed
	case ActRelease:
		return KindReleased
	case ActGateOpen:
		if state == tessera.StateCanceled {
			return KindCanceled
		}
		return KindGated
	case ActGateAnswer:
		return KindGateAnswered
	case ActGateTimeout:
		return KindGateTimedOut
	case ActTaskCancel:
		if state == tessera.StateCanceled {
			return KindCanceled
		}
		return KindCancelRequested
	case ActTaskPause:
		return KindPaused
	case ActTaskResume:
		return KindResumed
	case ActTaskRetry:
		return KindRetried
	case ActQueuePause:
		return KindQueuePaused
	case ActQueueResume:
		return KindQueueResumed
	case ActQueuePurge:
		return KindQueuePurged
	case ActRecordWrite:
		return KindRecordWritten
	case ActBlobCommit:
		return KindBlobStored
	}
	return action
}

// auditLapse writes the event of a lease that lapsed, in the transaction
// that noticed it (a claim, a heartbeat, a submit): no request asked for
// it, so it is the lease holder's, made with no key. A lapse that ends the
// task dead is how a dead task shows up on the stream.
func auditLapse(ctx context.Context, tx store.Tx, task *tessera.Task, holder, run string, now time.Time) error {
	return tx.AuditInsert(ctx, &tessera.AuditEvent{ID: ids.New(now), Time: now, Namespace: task.Namespace, PrincipalID: holder,
		Action: ActTaskLapse, Target: task.ID, RunID: run, TaskID: task.ID, Queue: task.Queue, State: task.VisibleState(now),
		Status: 200, Public: task.Public})
}
