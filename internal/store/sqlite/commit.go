package sqlite

import (
	"context"
	"errors"
	"fmt"

	"github.com/ncruces/go-sqlite3"

	"github.com/tessera-dev/tessera/internal/store"
)

// Group commit. One goroutine, the committer, owns the writer connection.
// Write transactions queue for it; it takes the one at the head and every
// one queued behind it (up to maxBatch), runs each in a savepoint of one
// SQLite transaction — so a failure rolls back only its own writes — and
// commits them together: one WAL fsync for the batch instead of one per
// request. No request is answered before the commit is durable
// (synchronous=FULL), so group commit changes what a write costs, never
// what an acknowledgement promises. With one request queued the batch is
// that request's own transaction, without a savepoint.

// Commits reports how many write transactions the store has committed:
// each is one WAL fsync (synchronous=FULL), whatever the requests in it.
func (db *DB) Commits() int64 { return db.commits.Load() }

// maxBatch bounds a batch, so one commit's latency stays a batch's work.
const maxBatch = 128

// writeReq is one queued write: a request's transaction, or the store's
// bookkeeping, which runs alone.
type writeReq struct {
	ctx  context.Context
	fn   func(store.Tx) error
	book func(*sqlite3.Conn) error // bookkeeping (ledger); runs alone
	// bookWrite lifts query_only for bookkeeping that writes.
	bookWrite bool
	done      chan writeResult
}

type writeResult struct {
	err    error
	topics []string
	// panicked is a panic of fn, re-raised in the caller's goroutine.
	panicked any
}

// submit queues req for the committer and waits for its answer.
func (db *DB) submit(req *writeReq) writeResult {
	req.done = make(chan writeResult, 1)
	select {
	case db.writes <- req:
	case <-db.stopped:
		return writeResult{err: errors.New("sqlite: store closed")}
	case <-req.ctx.Done():
		return writeResult{err: req.ctx.Err()}
	}
	// Once queued, the answer comes even if ctx ends: the committer may be
	// committing the request's writes this moment.
	return <-req.done
}

// commitLoop is the committer: it runs until Close stops it, then answers
// what is still queued with an error.
func (db *DB) commitLoop() {
	defer close(db.stopped)
	var next *writeReq
	for {
		req := next
		next = nil
		if req == nil {
			select {
			case req = <-db.writes:
			case <-db.stop:
				db.drain()
				return
			}
		}
		if req.book != nil {
			req.done <- writeResult{err: db.runBookkeeping(req)}
			continue
		}
		batch := []*writeReq{req}
	gather:
		for len(batch) < maxBatch {
			select {
			case r := <-db.writes:
				if r.book != nil {
					next = r
					break gather
				}
				batch = append(batch, r)
			default:
				break gather
			}
		}
		db.commitBatch(batch)
	}
}

// drain answers every queued request once the committer has stopped.
func (db *DB) drain() {
	for {
		select {
		case r := <-db.writes:
			r.done <- writeResult{err: errors.New("sqlite: store closed")}
		default:
			return
		}
	}
}

// commitBatch runs batch in one transaction, each request in a savepoint
// when there is more than one, commits, and answers each request.
func (db *DB) commitBatch(batch []*writeReq) {
	c := db.writer
	results := make([]writeResult, len(batch))
	written := make([]int64, len(batch))
	read := make([]int64, len(batch))
	answer := func() {
		for i, r := range batch {
			db.meter.Add(r.ctx, written[i], read[i])
			r.done <- results[i]
		}
	}
	refusing := db.meter.WriteRefusal() != nil
	if err := c.queryOnly(refusing); err != nil {
		for i := range results {
			results[i].err = err
		}
		answer()
		return
	}
	// Under query_only SQLite will not take the write lock, and nothing
	// may write anyway: a plain BEGIN lets the reads through.
	begin := "BEGIN IMMEDIATE"
	if refusing {
		begin = "BEGIN"
	}
	if err := c.c.Exec(begin); err != nil {
		for i := range results {
			results[i].err = fmt.Errorf("begin: %w", translate(err))
		}
		answer()
		return
	}
	alone := len(batch) == 1
	committed := 0
	for i, r := range batch {
		if err := r.ctx.Err(); err != nil {
			results[i].err = err
			continue
		}
		c.reset()
		if !alone {
			if err := c.c.Exec("SAVEPOINT request"); err != nil {
				results[i].err = fmt.Errorf("savepoint: %w", translate(err))
				continue
			}
		}
		t := &tx{c: c}
		p, err := run(r.fn, t)
		read[i] = c.rowsRead
		if err != nil || p != nil {
			results[i] = writeResult{err: err, panicked: p}
			if !alone {
				_ = c.c.Exec("ROLLBACK TO request")
				_ = c.c.Exec("RELEASE request")
			}
			continue
		}
		if !alone {
			if err := c.c.Exec("RELEASE request"); err != nil {
				results[i].err = fmt.Errorf("release: %w", translate(err))
				_ = c.c.Exec("ROLLBACK TO request")
				_ = c.c.Exec("RELEASE request")
				continue
			}
		}
		results[i].topics, written[i] = t.topics, c.rowsWritten
		committed++
	}
	if alone && (results[0].err != nil || results[0].panicked != nil) || committed == 0 {
		_ = c.c.Exec("ROLLBACK")
		answer()
		return
	}
	if err := c.c.Exec("COMMIT"); err != nil {
		_ = c.c.Exec("ROLLBACK")
		for i := range results {
			if results[i].err == nil && results[i].panicked == nil {
				results[i], written[i] = writeResult{err: fmt.Errorf("commit: %w", translate(err))}, 0
			}
		}
	} else if !refusing {
		db.commits.Add(1)
	}
	answer()
}

// run calls fn, turning a panic into a value for the caller to re-raise.
func run(fn func(store.Tx) error, t *tx) (panicked any, err error) {
	defer func() {
		if p := recover(); p != nil {
			panicked = p
		}
	}()
	return nil, fn(t)
}
