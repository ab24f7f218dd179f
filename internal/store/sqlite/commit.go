package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/tessera-dev/tessera/internal/store"
)

// Group commit. One goroutine, the committer, owns the writer connection.
// Write transactions queue for it. It runs them one after another in one
// SQLite transaction, each after the first in a savepoint — so a failure
// rolls back only its own writes — for as long as writes are queued, or
// the fsync of the batch before is still running (durable.go); then it
// commits them together: one commit and one WAL fsync for the batch
// instead of one per request, and the disk's wait spent running the next
// batch. No request is answered before its commit is durable, so group
// commit changes what a write costs, never what an acknowledgement
// promises. A write that finds the writer idle is its own transaction.

// CommitStats reports the write transactions the store has committed
// (each is one WAL fsync, whatever the requests in it), the fsyncs, and
// the time they took; and of the requests' transactions it answered,
// where their time went.
func (db *DB) CommitStats() store.CommitStats {
	s := store.CommitStats{Commits: db.commits.Load(), Syncing: true, Syncs: db.dur.syncs.Load(),
		SyncTime: time.Duration(db.dur.syncNanos.Load()), Writes: db.answered.Load()}
	for i := range s.WriteTime {
		s.WriteTime[i] = time.Duration(db.phaseNanos[i].Load())
	}
	return s
}

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
	// at marks where a transaction's phases (store.WritePhases) begin
	// and, last, when its caller has the answer; each is set by the
	// goroutine the request is with then, and read after done.
	at [len(store.WritePhases) + 1]time.Time
}

// Indexes into writeReq.at.
const (
	atQueued = iota
	atRunning
	atBatched
	atCommitting
	atSyncing
	atAnswering
	atAnswered
)

// timePhases adds an answered transaction's phases to the store's.
// Bookkeeping and requests answered without a commit (the store
// closing) have no phases.
func (db *DB) timePhases(req *writeReq) {
	if req.fn == nil || req.at[atSyncing].IsZero() {
		return
	}
	for i := range len(store.WritePhases) {
		db.phaseNanos[i].Add(int64(req.at[i+1].Sub(req.at[i])))
	}
	db.answered.Add(1)
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
	req.at[atQueued] = time.Now()
	// Close waits for the sends under way, and no send follows it: the
	// committer's last drain of the queue leaves nothing unanswered.
	db.closing.RLock()
	if db.closed {
		db.closing.RUnlock()
		return writeResult{err: errStoreClosed}
	}
	select {
	case db.writes <- req:
		db.closing.RUnlock()
	case <-req.ctx.Done():
		db.closing.RUnlock()
		return writeResult{err: req.ctx.Err()}
	}
	// Once queued, the answer comes even if ctx ends: the committer may be
	// committing the request's writes this moment.
	res := <-req.done
	req.at[atAnswered] = time.Now()
	db.timePhases(req)
	return res
}

// commitLoop is the committer: it runs until Close stops it, then answers
// what is still queued with an error.
func (db *DB) commitLoop() {
	defer close(db.stopped)
	// The syncer answers what was committed before the committer stops.
	defer func() {
		close(db.dur.acks)
		<-db.dur.done
	}()
	b := &batch{db: db}
	var next *writeReq
	for {
		req := next
		next = nil
		switch {
		case req != nil:
		case len(b.reqs) == 0:
			select {
			case req = <-db.writes:
			case <-db.stop:
				db.drain()
				return
			}
		case len(b.reqs) == maxBatch:
			b.commit()
			continue
		default:
			// Queued writes join the batch; with none, it commits as soon
			// as the syncer is free, and takes what arrives until then.
			select {
			case req = <-db.writes:
			default:
				select {
				case req = <-db.writes:
				case <-db.dur.free:
					b.commitFree()
					continue
				}
			}
		}
		if db.writer.inTx && b.refusing && db.meter.WriteRefusal() == nil {
			// The allowance was reset or raised while this batch ran
			// under query_only: it commits, and req runs in one that may
			// write.
			next = req
			b.commit()
			continue
		}
		if req.book != nil {
			if len(b.reqs) > 0 {
				next = req
				b.commit()
				continue
			}
			db.runBookkeepingReq(req)
			continue
		}
		b.run(req)
	}
}

// drain answers every queued request once the committer has stopped.
func (db *DB) drain() {
	for {
		select {
		case r := <-db.writes:
			r.done <- writeResult{err: errStoreClosed}
		default:
			return
		}
	}
}

// batch is the requests run since the last commit, and the transaction
// that holds the writes of those that succeeded.
type batch struct {
	db      *DB
	reqs    []*writeReq
	results []writeResult
	written []int64
	read    []int64
	// in is the requests whose writes the batch's transaction holds; the
	// writer's inTx says whether one is open.
	in       int
	refusing bool
	// held is the rows written by the requests in, counted in
	// DB.unbooked until the batch is answered and the meter has them.
	held int64
}

// run runs req in the batch's transaction, beginning one if none is open.
// The first request of a transaction needs no savepoint: if it fails,
// rolling back the transaction rolls back only its writes.
func (b *batch) run(req *writeReq) {
	c := b.db.writer
	i := len(b.reqs)
	b.reqs = append(b.reqs, req)
	b.results = append(b.results, writeResult{})
	b.written = append(b.written, 0)
	b.read = append(b.read, 0)
	res := &b.results[i]
	req.at[atRunning] = time.Now()
	defer func() { req.at[atBatched] = time.Now() }()
	if err := req.ctx.Err(); err != nil {
		res.err = err
		return
	}
	if !c.inTx {
		if err := b.begin(); err != nil {
			res.err = err
			return
		}
	}
	c.reset()
	if b.in > 0 {
		if err := c.control("SAVEPOINT request"); err != nil {
			res.err = fmt.Errorf("savepoint: %w", translate(err))
			return
		}
	}
	t := &tx{c: c}
	p, err := run(req.fn, t)
	b.read[i] = c.rowsRead
	if c.c.GetAutocommit() {
		// SQLite answered an error (a full disk, an I/O error) by rolling
		// back the whole transaction, not only the statement: the writes
		// of every request before this one in the batch are gone too.
		b.lost(err, p)
		return
	}
	if err == nil && p == nil && b.in > 0 {
		if err = c.control("RELEASE request"); err != nil {
			err = fmt.Errorf("release: %w", translate(err))
		}
	}
	if err != nil || p != nil {
		*res = writeResult{err: err, panicked: p}
		if b.in > 0 {
			_ = c.control("ROLLBACK TO request")
			_ = c.control("RELEASE request")
		} else {
			_ = c.control("ROLLBACK")
			c.inTx = false
		}
		return
	}
	res.topics, b.written[i] = t.topics, c.rowsWritten
	b.in++
	b.held += c.rowsWritten
	b.db.unbooked.Add(c.rowsWritten)
}

// lost answers a batch whose transaction SQLite rolled back whole while
// its last request ran (with err or the panic p): that request with its
// own outcome, or an error if it went on as if nothing had happened, and
// every request before it with the error that undid its writes. The
// writer refused the last request's statements after the rollback
// (errTxLost), so none of them committed on its own.
func (b *batch) lost(err error, p any) {
	last := len(b.results) - 1
	own := translate(err)
	if own == nil {
		own = errTxLost
	}
	if p == nil {
		b.results[last] = writeResult{err: own}
	} else {
		b.results[last] = writeResult{panicked: p}
	}
	// The others hear the storage error that undid them, never a domain
	// error of the last request's own.
	cause := own
	if p != nil || !store.IsUnavailable(own) {
		cause = errTxLost
	}
	b.failAll(fmt.Errorf("rolled back with its batch: %w", cause))
	b.db.writer.inTx = false
}

// failAll turns every success of the batch into err: its writes are not
// committed.
func (b *batch) failAll(err error) {
	for i, r := range b.results {
		if r.err == nil && r.panicked == nil {
			b.results[i], b.written[i] = writeResult{err: err}, 0
		}
	}
}

// begin opens the batch's transaction: BEGIN IMMEDIATE, or while the
// allowance refuses writes a plain BEGIN under query_only — SQLite will
// not take the write lock then, and nothing may write anyway, but reads
// get through.
func (b *batch) begin() error {
	c := b.db.writer
	if err := b.db.dur.broken(); err != nil {
		return err
	}
	b.refusing = b.db.meter.WriteRefusal() != nil
	if err := c.queryOnly(b.refusing); err != nil {
		return err
	}
	begin := "BEGIN IMMEDIATE"
	if b.refusing {
		begin = "BEGIN"
	}
	if err := c.control(begin); err != nil {
		return fmt.Errorf("begin: %w", translate(err))
	}
	b.in, c.inTx = 0, true
	return nil
}

// commit waits for the syncer to be free and commits.
func (b *batch) commit() {
	<-b.db.dur.free
	b.commitFree()
}

// commitFree commits the batch's transaction, once the syncer is free
// (the caller took its token), and hands the batch's answers to it: they
// are given once the commit is durable.
func (b *batch) commitFree() {
	db, c := b.db, b.db.writer
	committing := time.Now()
	var seq int64
	if c.inTx {
		c.inTx = false
		if err := db.dur.broken(); err != nil {
			// A batch ahead could not be made durable, and what it wrote
			// may be gone from the disk: this one is not built on it.
			_ = c.control("ROLLBACK")
			b.failAll(err)
		} else {
			// Counted before COMMIT makes the batch visible: a read that
			// ends after that moment waits for this commit's fsync
			// (durable.go). Under query_only the batch wrote nothing, and
			// needs none.
			if !b.refusing {
				seq = db.dur.begun.Add(1)
			}
			if err := c.control("COMMIT"); err != nil {
				_ = c.control("ROLLBACK")
				b.failAll(fmt.Errorf("commit: %w", translate(err)))
			} else if !b.refusing {
				db.commits.Add(1)
			}
		}
	}
	reqs, results, written, read, held := b.reqs, b.results, b.written, b.read, b.held
	syncing := time.Now()
	for _, r := range reqs {
		r.at[atCommitting], r.at[atSyncing] = committing, syncing
	}
	db.dur.acks <- ack{seq: seq, answer: func(syncErr error) {
		answering := time.Now()
		for i, r := range reqs {
			r.at[atAnswering] = answering
			if syncErr != nil && results[i].err == nil && results[i].panicked == nil {
				results[i].err = syncErr
			}
			db.meter.Add(r.ctx, written[i], read[i])
			r.done <- results[i]
		}
		db.unbooked.Add(-held)
	}}
	*b = batch{db: db}
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
