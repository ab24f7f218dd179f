package postgres

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tessera-dev/tessera/internal/store"
)

// Group commit. A node's Updates queue for a few committers, each of
// which takes every Update waiting when it is free and runs them in one
// transaction, each behind a SAVEPOINT of its own, with one COMMIT, one
// counts upsert and one WAL flush for all of them. Three durable commits a
// task, each with its BEGIN, its counts and its flush, were most of what
// PostgreSQL spent on a task (docs/design.md, "Group commit on
// PostgreSQL"). A lone Update runs in a transaction of its own, as
// before; batches form only when Updates arrive faster than the
// committers finish them. An Update then waits for the batch ahead of it
// instead of running beside it, which under load was the faster of the
// two: every call's median latency fell (7–10 ms to 7 ms at 16 workers).
//
// What sharing a transaction changes, and what it does not:
//   - Each Update still sees the database as a serial order would: the
//     ones before it in its batch have run, and it sees their writes.
//     They commit together or not at all.
//   - One that fails is rolled back to its savepoint and answers its
//     error; the others go on. One that lost a race (store.ErrRetry) runs
//     again, as Update always did, in a transaction of its own.
//   - When the shared transaction cannot go on (a savepoint that cannot
//     be rolled back to, a broken connection, a COMMIT the server refused)
//     nothing of it committed, and every Update of the batch runs again on
//     its own. Only a connection lost during the COMMIT itself leaves the
//     outcome unknown, as for a transaction alone.
//   - Locks are held until the batch commits. Two batches can deadlock
//     where their Updates alone would not (one's first holds a row the
//     other's second wants, and the other way round); PostgreSQL breaks it
//     after deadlock_timeout (1 s by default) and the Update it chose runs
//     again on its own.

// groupMax bounds a batch: a savepoint each, in one transaction.
const groupMax = 16

// committers is how many batches a node runs at once: an eighth of the
// pool, at least two, so that an Update that waits on a lock held by
// another batch's transaction never waits for its own committer. Fewer
// committers make bigger batches: on one node of 16 workers, 2 spent
// less of PostgreSQL's CPU a task than 4 and 8, and on two nodes did
// more as well (docs/design.md, "Group commit on PostgreSQL").
func committers(pool int) int { return max(2, pool/8) }

type grouper struct {
	db    *DB
	queue chan *pending
	stop  chan struct{}
	wg    sync.WaitGroup
	// closed is closed once no committer runs any more.
	closed chan struct{}
}

// pending is one Update waiting for its batch, and then its outcome.
type pending struct {
	ctx  context.Context
	fn   func(store.Tx) error
	done chan struct{}

	err      error
	panicked any
	// alone: run it again in a transaction of its own.
	alone bool
}

func startGrouper(db *DB, n int) *grouper {
	g := &grouper{db: db, queue: make(chan *pending, 1024), stop: make(chan struct{}), closed: make(chan struct{})}
	g.wg.Add(n)
	for range n {
		go g.committer()
	}
	return g
}

func (g *grouper) close() {
	close(g.stop)
	g.wg.Wait()
	close(g.closed)
}

// update runs fn in a batch and reports what became of it; again says it
// did not run to an outcome, and must run in a transaction of its own.
func (g *grouper) update(ctx context.Context, fn func(store.Tx) error) (again bool, err error) {
	p := &pending{ctx: ctx, fn: fn, done: make(chan struct{})}
	select {
	case g.queue <- p:
	case <-ctx.Done():
		return false, ctx.Err()
	case <-g.stop:
		return true, nil // closing: the pool answers
	}
	select {
	case <-p.done:
	case <-g.closed: // no committer will take it
		select {
		case <-p.done:
		default:
			return true, nil
		}
	}
	if p.panicked != nil {
		panic(p.panicked)
	}
	return p.alone, p.err
}

func (g *grouper) committer() {
	defer g.wg.Done()
	for {
		var batch []*pending
		select {
		case <-g.stop:
			return
		case p := <-g.queue:
			batch = append(batch, p)
		}
	gather:
		for len(batch) < groupMax {
			select {
			case p := <-g.queue:
				batch = append(batch, p)
			default:
				break gather
			}
		}
		g.run(batch)
		for _, p := range batch {
			close(p.done)
		}
	}
}

// run runs a batch: one Update alone, as Update always did; several in one
// transaction.
func (g *grouper) run(batch []*pending) {
	db := g.db
	if len(batch) == 1 || db.meter.ReadRefusal() != nil || db.meter.WriteRefusal() != nil {
		// Refused reads and writes take the path that answers them.
		for _, p := range batch {
			g.alone(p)
		}
		return
	}
	ctx, stop := sharedContext(batch)
	defer stop()
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		for _, p := range batch {
			p.alone = true
		}
		return
	}
	defer conn.Release()
	c := conn.Conn()
	t := &tx{db: db, c: c, ctx: ctx, later: []later{{sql: "BEGIN ISOLATION LEVEL READ COMMITTED"}}, counts: countChanges{}}
	// Every Update of the batch runs again alone; nothing of it committed.
	abandon := func() {
		rollback(c)
		for _, p := range batch {
			p.alone, p.err, p.panicked = true, nil, nil
		}
	}
	// The rows each Update that succeeded wrote and read, metered once
	// they commit.
	shares := make([]*tally, len(batch))
	for i, p := range batch {
		if err := p.ctx.Err(); err != nil {
			p.err = err
			continue
		}
		savepoint := "s" + strconv.Itoa(i)
		before := t.mark()
		t.later = append(t.later, later{sql: "SAVEPOINT " + savepoint})
		p.panicked, p.err = call(func() error { return p.fn(t) })
		if p.err == nil && p.panicked == nil {
			share := t.tally.less(before.tally)
			shares[i] = &share
			continue
		}
		// Rows it read were read; rows it wrote are undone.
		db.meter.Add(p.ctx, 0, t.tally.read-before.tally.read)
		if !t.undo(ctx, before, savepoint) {
			abandon()
			return
		}
	}
	if !slices.ContainsFunc(shares, func(s *tally) bool { return s != nil }) {
		rollback(c)
		return
	}
	if err := t.commit(ctx); err != nil {
		if c.IsClosed() && !pgconn.SafeToRetry(err) && ctx.Err() == nil {
			for i, p := range batch {
				if shares[i] != nil {
					p.err = outcomeUnknown(err)
				}
			}
			return
		}
		abandon() // the server refused the COMMIT, or it was never sent: nothing committed
		return
	}
	for i, p := range batch {
		if s := shares[i]; s != nil {
			db.meter.Add(p.ctx, s.written, s.read)
			db.writes.Add(1)
		}
	}
	db.delivered(t.topics)
}

// alone runs one Update in a transaction of its own, on the committer: a
// committer busy with it is what lets the next ones gather into a batch.
func (g *grouper) alone(p *pending) {
	var topics []string
	p.panicked, p.err = call(func() (err error) {
		topics, err = g.db.attempt(p.ctx, false, p.fn)
		return err
	})
	if p.err == nil && p.panicked == nil {
		g.db.delivered(topics)
	}
}

// call runs fn, turning a panic into a value to raise again in the
// caller's goroutine.
func call(f func() error) (panicked any, err error) {
	defer func() {
		if r := recover(); r != nil {
			panicked = r
		}
	}()
	return nil, f()
}

// sharedContext is the context of a batch's statements: it ends when every
// Update of the batch has given up, so that one request gone does not
// cancel a statement (and break the connection) the others share.
func sharedContext(batch []*pending) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	left := int64(len(batch))
	stops := make([]func() bool, len(batch))
	for i, p := range batch {
		stops[i] = context.AfterFunc(p.ctx, func() {
			if atomic.AddInt64(&left, -1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, s := range stops {
			s()
		}
		cancel()
	}
}

// mark is where a transaction stood before an Update of its batch: what
// undo takes it back to.
type mark struct {
	later, sends, topics int
	tally                tally
	counts               countChanges
}

func (t *tx) mark() mark {
	return mark{later: len(t.later), sends: t.sends, topics: len(t.topics), tally: t.tally, counts: t.counts.clone()}
}

// undo takes the transaction back to m: what the Update queued is dropped,
// and what it sent is rolled back to its savepoint. It reports false when
// that could not be done.
func (t *tx) undo(ctx context.Context, m mark, savepoint string) bool {
	t.tally, t.counts, t.topics = m.tally, m.counts, t.topics[:m.topics]
	if t.sends == m.sends { // nothing of it reached the server, its SAVEPOINT included
		t.later = t.later[:m.later]
		return true
	}
	t.later = nil
	if _, err := t.send(ctx, "ROLLBACK TO SAVEPOINT "+savepoint, nil, nil); err != nil {
		return false
	}
	return !t.c.IsClosed()
}

func (c countChanges) clone() countChanges {
	out := maps.Clone(c)
	for k, r := range out {
		copied := *r
		out[k] = &copied
	}
	return out
}

func (t tally) less(u tally) tally { return tally{t.written - u.written, t.read - u.read} }
