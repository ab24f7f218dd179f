package core

import (
	"context"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// watchedStore is the store as the service sees it: a write transaction
// that committed a change to a namespace's tasks, records, buckets or
// blobs then calls changed for that namespace (StateChanged, which drops
// its public snapshot). Watching the store's writes is the one place that
// covers every path — enqueue, claim, a lapse noticed by a claim, submit,
// cancel, retry, record and bucket writes — without each having to
// remember. Audit and observational writes are not state changes: a keyed
// health read, which writes its audit event, keeps its snapshot.
type watchedStore struct {
	store.Store
	changed func(ns string)
}

func (w watchedStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	var wt *watchedTx
	err := w.Store.Update(ctx, func(tx store.Tx) error {
		wt = &watchedTx{Tx: tx}
		return fn(wt)
	})
	if err == nil && wt != nil {
		for _, ns := range wt.changed {
			w.changed(ns)
		}
	}
	return err
}

// watchedTx notes the namespaces whose state a transaction changed; they
// are told only once it committed.
type watchedTx struct {
	store.Tx
	changed []string
}

func (t *watchedTx) mark(ns string, err error) error {
	if err == nil {
		for _, n := range t.changed {
			if n == ns {
				return nil
			}
		}
		t.changed = append(t.changed, ns)
	}
	return err
}

func (t *watchedTx) TaskInsert(ctx context.Context, task *tessera.Task) error {
	return t.mark(task.Namespace, t.Tx.TaskInsert(ctx, task))
}

func (t *watchedTx) TaskUpdate(ctx context.Context, task *tessera.Task) error {
	return t.mark(task.Namespace, t.Tx.TaskUpdate(ctx, task))
}

func (t *watchedTx) RecordPut(ctx context.Context, r *tessera.Record, prev int64) error {
	return t.mark(r.Namespace, t.Tx.RecordPut(ctx, r, prev))
}

func (t *watchedTx) BucketPut(ctx context.Context, b *tessera.Bucket) error {
	return t.mark(b.Namespace, t.Tx.BucketPut(ctx, b))
}

func (t *watchedTx) BlobPut(ctx context.Context, b *tessera.Blob) error {
	return t.mark(b.Namespace, t.Tx.BlobPut(ctx, b))
}
