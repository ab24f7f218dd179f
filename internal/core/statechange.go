package core

import (
	"context"
	"errors"
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
		s.signals.fireAll()
		return
	}
	if len(topic) < 2 {
		return
	}
	name := topic[2:]
	switch topic[0] {
	case 'q':
		// New claimable work: waiting claims look again, and empty-claim
		// hints for the queue start over (§6).
		s.hints.enqueued(topic, s.clock.Now())
		s.signals.fire(topic)
	case 't':
		s.signals.fire(topic)
	case 's':
		s.StateChanged(name)
	case 'k':
		s.auth.ForgetKey(name)
	case 'p':
		s.auth.ForgetPrincipal(name)
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
	err := w.Store.Update(ctx, func(tx store.Tx) error {
		last = &watchedTx{Tx: tx}
		return fn(last)
	})
	if err == nil && last != nil && w.ended != nil {
		for _, e := range last.ends {
			t := last.tasks[[2]string{e.ns, e.taskID}]
			w.ended(e.ns, t.Queue, e.outcome, t.State)
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

// watchedTx notifies each namespace whose state the transaction changed,
// once.
type watchedTx struct {
	store.Tx
	changed []string
	// tasks are the tasks updated, as last written; ends the runs ended.
	tasks map[[2]string]tessera.Task
	ends  []runEnded
}

type runEnded struct{ ns, taskID, outcome string }

func (t *watchedTx) mark(ctx context.Context, ns string, err error) error {
	if err == nil {
		for _, n := range t.changed {
			if n == ns {
				return nil
			}
		}
		t.changed = append(t.changed, ns)
		t.Tx.Notify(ctx, snapshotTopic(ns))
	}
	return err
}

func (t *watchedTx) TaskInsert(ctx context.Context, task *tessera.Task) error {
	return t.mark(ctx, task.Namespace, t.Tx.TaskInsert(ctx, task))
}

func (t *watchedTx) TaskUpdate(ctx context.Context, before, after *tessera.Task) error {
	err := t.Tx.TaskUpdate(ctx, before, after)
	if err == nil {
		if t.tasks == nil {
			t.tasks = map[[2]string]tessera.Task{}
		}
		t.tasks[[2]string{after.Namespace, after.ID}] = tessera.Task{Queue: after.Queue, State: after.State}
		// A run ends on its task's row, in the write that moves the task on.
		if r := after.Run; r != nil && r.EndedAt != nil && (before.Run == nil || before.Run.EndedAt == nil) {
			t.ends = append(t.ends, runEnded{ns: after.Namespace, taskID: after.ID, outcome: r.Outcome})
		}
	}
	return t.mark(ctx, before.Namespace, err)
}

func (t *watchedTx) TaskClaim(ctx context.Context, p store.TaskClaim) (*tessera.Task, error) {
	task, err := t.Tx.TaskClaim(ctx, p)
	return task, t.mark(ctx, p.Namespace, err)
}

func (t *watchedTx) TaskClaimMany(ctx context.Context, p store.TaskClaimMany) ([]tessera.Task, error) {
	tasks, err := t.Tx.TaskClaimMany(ctx, p)
	if len(tasks) == 0 {
		return tasks, err
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
