package core

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// Topics the service notifies through the store (store.Tx.Notify): every
// node's listener gets them once the transaction that notified commits.
// The first byte says what the rest names.
func queueTopic(ns, queue string) string { return "q\x00" + ns + "\x00" + queue }
func taskTopic(ns, id string) string     { return "t\x00" + ns + "\x00" + id }
func snapshotTopic(ns string) string     { return "s\x00" + ns }
func keyTopic(id string) string          { return "k\x00" + id }
func principalTopic(id string) string    { return "p\x00" + id }
func namespaceTopic(ns string) string    { return "n\x00" + ns }
func pauseTopic(ns string) string        { return "Q\x00" + ns }
func fleetTopic(ns string) string        { return "F\x00" + ns }

// notified is the store's listener: long-poll wake-ups, snapshot drops and
// forgotten keys, from this node's commits and every other node's alike.
func (s *Service) notified(topic string) {
	if topic == store.TopicGap {
		// Changes elsewhere may have gone unheard: forget every snapshot
		// and cached key, which the next request rebuilds, and wake every
		// long-poll, which looks again (§6: an enqueue wakes a waiting
		// claim at once, not when its wait runs out).
		s.snaps.dropAll()
		s.auth.ForgetAll()
		s.queues.gap()
		s.pauses.forgetAll()
		s.fleet.forgetAll()
		s.signals.fireAll()
		return
	}
	if len(topic) < 2 {
		return
	}
	name := topic[2:]
	switch topic[0] {
	case 'q':
		// New claimable work: waiting claims that can take it look again,
		// and empty-claim hints for the queue start over (§6).
		queue, _, _ := strings.Cut(topic, laneSep)
		s.hints.enqueued(queue, s.clock.Now())
		s.queues.enqueued(queue)
		s.signals.fire(topic)
	case 't', 'w':
		s.signals.fire(topic)
	case 's':
		s.StateChanged(name)
		s.signals.fire(streamTopic(name))
	case 'k':
		s.auth.ForgetKey(name)
		s.signals.fire(streamKeyTopic(name))
	case 'p':
		s.auth.ForgetPrincipal(name)
		s.signals.fire(streamPrincipalTopic(name))
	case 'Q':
		s.pauses.forget(name)
	case 'F':
		s.fleet.forget(name)
	case 'n':
		s.forgetNamespace(name)
	}
}

// watchedStore is the store as the service sees it: a transaction that
// changes a namespace's tasks, records, buckets or blobs notifies that
// namespace's snapshot topic, which drops its public snapshot on every
// node once the change committed. Watching the store's writes is the one
// place that covers every path — enqueue, claim, a lapse noticed by a
// claim, submit, cancel, retry, record and bucket writes — without each
// having to remember. Audit and observational writes are not state
// changes: a keyed health read, which writes its audit event, keeps its
// snapshot.
//
// It also reports each run the committed transaction ended (ended, for
// the metrics), with its queue and the state its task was left in: this
// node's commits only, so counts add up across nodes.
type watchedStore struct {
	store.Store
	ended func(ns, queue, outcome, state string)
}

func (w watchedStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	var last *watchedTx // fn may run again after a lost race: the last run committed
	ctx, span := storeSpan(ctx, "store.update")
	err := w.Store.Update(ctx, func(tx store.Tx) error {
		last = &watchedTx{Tx: tx, traced: span.IsRecording()}
		return fn(last)
	})
	endSpan(span, err)
	if err == nil && last != nil && w.ended != nil {
		for _, e := range last.ends {
			t := last.tasks[[2]string{e.ns, e.taskID}]
			w.ended(e.ns, t.queue, e.outcome, t.state)
			if e.task != nil {
				runSpan(ctx, e.task)
			}
		}
		for i := range last.grants {
			grantSpan(ctx, &last.grants[i])
		}
	}
	if errors.Is(err, store.ErrRetry) {
		// Still losing races after store.MaxAttempts: contention, not a
		// fault. The client may retry, as after any 503.
		return &tessera.Error{Code: tessera.CodeUnavailable, RetryAfter: time.Second,
			Message: "the request kept racing concurrent changes; retry it"}
	}
	return err
}

func (w watchedStore) View(ctx context.Context, fn func(store.Tx) error) error {
	ctx, span := storeSpan(ctx, "store.view")
	err := w.Store.View(ctx, fn)
	endSpan(span, err)
	return err
}

// watchedTx notifies each namespace whose state the transaction changed,
// once.
type watchedTx struct {
	store.Tx
	// traced says spans are exported: the runs ended and the tasks
	// granted are kept whole, for their spans (tracing.go).
	traced  bool
	grants  []tessera.Task
	changed []string
	// tasks are the tasks written (inserted, claimed, updated) as last
	// written, and those held for a write under their lease; ends the
	// runs ended.
	tasks map[[2]string]seenTask
	ends  []runEnded
}

// seenTask is what a transaction wrote of a task, or read of one it held.
type seenTask struct {
	queue, state string
	runAt        time.Time
	run          string // the lease's run, when it had one
	written      bool
}

func (t *watchedTx) see(task *tessera.Task, written bool) {
	if t.tasks == nil {
		t.tasks = map[[2]string]seenTask{}
	}
	k := [2]string{task.Namespace, task.ID}
	if !written && t.tasks[k].written {
		return // written already: what it holds is newer
	}
	seen := seenTask{queue: task.Queue, state: task.State, runAt: task.RunAt, written: written}
	if task.Lease != nil {
		seen.run = task.Lease.RunID
	}
	t.tasks[k] = seen
}

// AuditInsert fills in what the event stream needs of an event and the
// action did not say: the task it was about (its target, when the
// transaction wrote that task) or done under (the task whose lease run it
// names, held for the write), that task's queue, and the state it was left
// in when the transaction changed it. Every audited action passes here, so
// none has to remember.
func (t *watchedTx) AuditInsert(ctx context.Context, e *tessera.AuditEvent) error {
	if e.TaskID == "" {
		if _, ok := t.tasks[[2]string{e.Namespace, e.Target}]; ok {
			e.TaskID = e.Target
		} else if e.RunID != "" {
			for k, seen := range t.tasks {
				if k[0] == e.Namespace && seen.run == e.RunID {
					e.TaskID = k[1]
				}
			}
		}
	}
	if seen, ok := t.tasks[[2]string{e.Namespace, e.TaskID}]; ok && e.TaskID != "" {
		if e.Queue == "" {
			e.Queue = seen.queue
		}
		if e.State == "" && seen.written && e.TaskID == e.Target {
			e.State = (&tessera.Task{State: seen.state, RunAt: seen.runAt}).VisibleState(e.Time)
		}
	}
	return t.Tx.AuditInsert(ctx, e)
}

type runEnded struct {
	ns, taskID, outcome string
	task                *tessera.Task // as the run's end left it, when traced
}

func (t *watchedTx) mark(ctx context.Context, ns string, err error) error {
	if err == nil {
		t.changedIn(ctx, ns)
	}
	return err
}

// changedIn notes that the transaction changed the namespace's state.
func (t *watchedTx) changedIn(ctx context.Context, ns string) {
	if !slices.Contains(t.changed, ns) {
		t.changed = append(t.changed, ns)
		t.Tx.Notify(ctx, snapshotTopic(ns))
	}
}

func (t *watchedTx) TaskInsert(ctx context.Context, task *tessera.Task) error {
	err := t.Tx.TaskInsert(ctx, task)
	if err == nil {
		t.see(task, true)
	}
	return t.mark(ctx, task.Namespace, err)
}

func (t *watchedTx) TaskUpdate(ctx context.Context, before, after *tessera.Task) error {
	err := t.Tx.TaskUpdate(ctx, before, after)
	if err == nil {
		t.updated(before, after)
	}
	return t.mark(ctx, before.Namespace, err)
}

func (t *watchedTx) TaskUpdateMany(ctx context.Context, changes []store.TaskChange) error {
	if err := t.Tx.TaskUpdateMany(ctx, changes); err != nil {
		return err
	}
	for _, c := range changes {
		t.updated(c.Before, c.After)
		t.changedIn(ctx, c.Before.Namespace)
	}
	return nil
}

// updated sees a task written over before, and the run its write ended.
func (t *watchedTx) updated(before, after *tessera.Task) {
	t.see(after, true)
	// A run ends on its task's row, in the write that moves the task on.
	if r := after.Run; r != nil && r.EndedAt != nil && (before.Run == nil || before.Run.EndedAt == nil) {
		e := runEnded{ns: after.Namespace, taskID: after.ID, outcome: r.Outcome}
		if t.traced {
			e.task = after
		}
		t.ends = append(t.ends, e)
	}
}

func (t *watchedTx) TaskHold(ctx context.Context, ns, id string) (*tessera.Task, error) {
	task, err := t.Tx.TaskHold(ctx, ns, id)
	if err == nil {
		t.see(task, false)
	}
	return task, err
}

// A task found holding an enqueue's unique key is the enqueue's event's
// task, as a task held is.
func (t *watchedTx) TaskByUniqueKey(ctx context.Context, ns, queue, key string) (*tessera.Task, error) {
	task, err := t.Tx.TaskByUniqueKey(ctx, ns, queue, key)
	if err == nil {
		t.see(task, false)
	}
	return task, err
}

func (t *watchedTx) TaskClaim(ctx context.Context, p store.TaskClaim) (*tessera.Task, error) {
	task, err := t.Tx.TaskClaim(ctx, p)
	if err == nil {
		t.see(task, true)
		if t.traced {
			t.grants = append(t.grants, *task)
		}
	}
	return task, t.mark(ctx, p.Namespace, err)
}

func (t *watchedTx) TaskPurgeFinished(ctx context.Context, ns, queue string, states []string, limit int) (int, error) {
	n, err := t.Tx.TaskPurgeFinished(ctx, ns, queue, states, limit)
	return n, t.mark(ctx, ns, err)
}

// A queue's pause is a state change too: it drops the snapshot and wakes
// the namespace's streams.
func (t *watchedTx) QueuePause(ctx context.Context, p store.QueuePause) (bool, error) {
	changed, err := t.Tx.QueuePause(ctx, p)
	return changed, t.mark(ctx, p.Namespace, err)
}

func (t *watchedTx) QueueResume(ctx context.Context, ns, queue string) (bool, error) {
	changed, err := t.Tx.QueueResume(ctx, ns, queue)
	return changed, t.mark(ctx, ns, err)
}

func (t *watchedTx) TaskClaimMany(ctx context.Context, p store.TaskClaimMany) ([]tessera.Task, error) {
	tasks, err := t.Tx.TaskClaimMany(ctx, p)
	if len(tasks) == 0 {
		return tasks, err
	}
	for i := range tasks {
		t.see(&tasks[i], true)
	}
	if t.traced {
		t.grants = append(t.grants, tasks...)
	}
	return tasks, t.mark(ctx, p.Namespace, err)
}

func (t *watchedTx) RecordPut(ctx context.Context, r *tessera.Record, prev int64) error {
	return t.mark(ctx, r.Namespace, t.Tx.RecordPut(ctx, r, prev))
}

func (t *watchedTx) BucketPut(ctx context.Context, b *tessera.Bucket) error {
	return t.mark(ctx, b.Namespace, t.Tx.BucketPut(ctx, b))
}

func (t *watchedTx) BlobPut(ctx context.Context, b *tessera.Blob) error {
	return t.mark(ctx, b.Namespace, t.Tx.BlobPut(ctx, b))
}

func (t *watchedTx) NamespacePurge(ctx context.Context, ns string, limit int) (int, error) {
	n, err := t.Tx.NamespacePurge(ctx, ns, limit)
	return n, t.mark(ctx, ns, err)
}
