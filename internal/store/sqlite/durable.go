package sqlite

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tessera-dev/tessera/internal/store"
)

// Durability off the committer's path. The writer runs with
// synchronous=NORMAL: its COMMIT writes the batch's WAL frames and makes
// them visible, but does not fsync. The committer hands the batch's
// answers to the syncer and starts the next batch at once; the syncer
// fdatasyncs the WAL and only then answers them. So no write is
// acknowledged before the WAL holds it on disk, as under
// synchronous=FULL, but the batch behind runs its statements while the
// one ahead waits for the disk, instead of after it. The next batch
// commits once the syncer is free again (commit.go), so a commit and an
// fsync are one to one.
//
// What a commit makes visible is seen before it is durable, so whatever
// could reveal it waits for the fsync too: a later batch's answers queue
// behind the earlier batch's (the syncer answers in commit order), and a
// read waits for the fsync of every commit begun before its transaction
// ended. An fsync that covers commit N covers every earlier frame of the
// WAL, since they were written before it was called.

// ack is one batch's answers, given once the WAL holding its commit
// (seq; 0 for a batch that committed nothing) is durable, or with the
// error that says it may not be.
type ack struct {
	seq    int64
	answer func(syncErr error)
}

// durability is the state the committer, the syncer and readers share.
type durability struct {
	wal *os.File
	// syncFile is fdatasync on Linux (what SQLite's own FULL mode calls),
	// fsync elsewhere; tests hold or fail it.
	syncFile func(*os.File) error
	acks     chan ack
	// free holds a token while the syncer is idle: the committer takes it
	// before it commits, so one batch's fsync runs at a time.
	free chan struct{}
	done chan struct{} // closed when the syncer has answered its last ack

	// begun counts commits the committer has started; durable is the
	// highest whose WAL frames are on disk.
	begun, durable   atomic.Int64
	syncs, syncNanos atomic.Int64

	mu sync.Mutex
	// advanced is closed, and replaced, each time durable moves.
	advanced chan struct{}
	// failed is set for good by a failed fsync (see fail).
	failed atomic.Pointer[store.UnavailableError]
}

func newDurability(walPath string) (*durability, error) {
	wal, err := os.Open(walPath)
	if err != nil {
		return nil, fmt.Errorf("open the WAL to sync it: %w", err)
	}
	d := &durability{wal: wal, syncFile: fdatasync, acks: make(chan ack, 1), free: make(chan struct{}, 1),
		done: make(chan struct{}), advanced: make(chan struct{})}
	d.free <- struct{}{}
	return d, nil
}

// syncLoop is the syncer: it runs until the committer closes acks. It
// takes one batch at a time; the committer hands it the next only after
// taking back the token (free) it returns, and meanwhile goes on running
// writes into the next batch.
func (d *durability) syncLoop() {
	defer close(d.done)
	for a := range d.acks {
		var err error
		if a.seq > d.durable.Load() {
			err = d.sync(a.seq)
		} else {
			err = d.broken()
		}
		a.answer(err)
		d.free <- struct{}{}
	}
}

// sync makes every commit up to seq durable, or fails the store.
func (d *durability) sync(seq int64) error {
	if e := d.failed.Load(); e != nil {
		return e
	}
	start := time.Now()
	if err := d.syncFile(d.wal); err != nil {
		return d.fail(err)
	}
	d.syncNanos.Add(int64(time.Since(start)))
	d.syncs.Add(1)
	d.durable.Store(seq)
	d.wake()
	return nil
}

// wake tells the readers waiting in await that durable moved, or the
// store failed.
func (d *durability) wake() {
	d.mu.Lock()
	close(d.advanced)
	d.advanced = make(chan struct{})
	d.mu.Unlock()
}

// fail stops the store for good after a failed fsync. The commits it
// covered are visible but may not be on disk, and after a failed fsync
// the kernel may have dropped the dirty pages: writing on would build on
// what may be gone, and a retried fsync can report success without them
// (PostgreSQL panics for the same reason). After a restart SQLite
// recovers what the WAL really holds.
func (d *durability) fail(err error) error {
	d.failed.CompareAndSwap(nil, &store.UnavailableError{RetryAfter: 30 * time.Second, Err: err,
		Message: "storage is unavailable (the write-ahead log could not be synced to disk, so the last writes may not be durable); restart the server"})
	d.wake()
	return d.failed.Load()
}

// broken is the failed fsync's error once there has been one.
func (d *durability) broken() error {
	if e := d.failed.Load(); e != nil {
		return e
	}
	return nil
}

// await waits until every commit begun so far is durable: what a read
// transaction that has just ended may have seen.
func (d *durability) await(ctx context.Context) error {
	seq := d.begun.Load()
	for {
		d.mu.Lock()
		advanced := d.advanced
		d.mu.Unlock()
		if err := d.broken(); err != nil {
			return err
		}
		if d.durable.Load() >= seq {
			return nil
		}
		select {
		case <-advanced:
		case <-d.done:
			return errStoreClosed
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
