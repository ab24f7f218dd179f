package postgres

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/tessera-dev/tessera/internal/store/sqlschema"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// Task counts (task_counts: a row per namespace, queue, visibility and
// shard; a column per counted state, ready the total less them). Every
// statement that adds, removes or moves a task knows what it moved — the
// task it inserted, the before and after of its update, the rows its
// claim or delete returned — so a transaction sums its changes here, in
// memory, and writes them with its COMMIT, in the same round trip: one
// upsert of the rows it changed, in key order. (Migration 0014 says what
// this replaces: triggers that gathered the same changes in a temporary
// table, a fifth of PostgreSQL's CPU per task.)
//
// A counts row is locked from that upsert until the commit is done, WAL
// flush included. Commits that ran at once on one row would wait for each
// other, so each commit writes to a shard of its own: a node holds one
// shard per connection of its pool at a time, from a random base, and two
// of its commits never share one. A task's count may leave a shard other
// than the one it entered, so a shard can hold a negative count; reads sum
// the shards.

// countShards bounds the shards of a queue's counts: its rows, which a
// read sums.
const countShards = 64

type countKey struct {
	ns, queue string
	public    bool
}

// countRow is the total, then a count per sqlschema.CountedStates.
type countRow [1 + len(sqlschema.CountedStates)]int64

// countChanges are a transaction's count changes so far.
type countChanges map[countKey]*countRow

// add counts task in (sign 1) or out (-1): its total, and its state when
// that has a column.
func (c countChanges) add(task *tessera.Task, sign int64) {
	c.move(task.Namespace, task.Queue, task.Public, "", task.State, sign)
}

// move counts a task of the queue going from state from to state to
// ("" for none: a task added or removed, which moves the total too).
func (c countChanges) move(ns, queue string, public bool, from, to string, sign int64) {
	k := countKey{ns, queue, public}
	r := c[k]
	if r == nil {
		r = &countRow{}
		c[k] = r
	}
	if from == "" || to == "" {
		r[0] += sign
	}
	for i, st := range sqlschema.CountedStates {
		if st == from {
			r[1+i] -= sign
		}
		if st == to {
			r[1+i] += sign
		}
	}
}

// countsUpsert writes summed changes to a shard, rows in key order so
// that commits sharing rows lock them in one order.
const countsUpsert = `INSERT INTO task_counts (namespace, queue, public, shard, total, leased, paused, succeeded, dead, canceled, waiting, gated)
 SELECT ns, q, p, $4, t, l, pa, s, d, c, w, g
 FROM unnest($1::text[], $2::text[], $3::bool[], $5::int8[], $6::int8[], $7::int8[], $8::int8[], $9::int8[], $10::int8[], $11::int8[], $12::int8[])
   AS u(ns, q, p, t, l, pa, s, d, c, w, g)
 ON CONFLICT (namespace, queue, public, shard) DO UPDATE SET total = task_counts.total + excluded.total,
   leased = task_counts.leased + excluded.leased, paused = task_counts.paused + excluded.paused,
   succeeded = task_counts.succeeded + excluded.succeeded, dead = task_counts.dead + excluded.dead,
   canceled = task_counts.canceled + excluded.canceled, waiting = task_counts.waiting + excluded.waiting,
   gated = task_counts.gated + excluded.gated`

// args are countsUpsert's arguments for shard, nil when nothing changed.
func (c countChanges) args(shard int) []any {
	keys := make([]countKey, 0, len(c))
	for k, r := range c {
		if *r != (countRow{}) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	slices.SortFunc(keys, func(a, b countKey) int {
		if c := cmp.Compare(a.ns, b.ns); c != 0 {
			return c
		}
		if c := cmp.Compare(a.queue, b.queue); c != 0 {
			return c
		}
		switch {
		case a.public == b.public:
			return 0
		case b.public:
			return -1
		}
		return 1
	})
	nss, queues, publics := make([]string, len(keys)), make([]string, len(keys)), make([]bool, len(keys))
	var cols [len(countRow{})][]int64
	for i, k := range keys {
		nss[i], queues[i], publics[i] = k.ns, k.queue, k.public
		for j, v := range c[k] {
			cols[j] = append(cols[j], v)
		}
	}
	args := []any{nss, queues, publics, shard}
	for _, col := range cols {
		args = append(args, col)
	}
	return args
}

// shards hands each commit of this node a shard no other commit of it
// holds meanwhile: the one given back last, so a node that commits one
// at a time keeps updating one row per queue.
type shards struct {
	slots chan struct{} // one per shard
	mu    sync.Mutex
	free  []int
}

func newShards(n int) *shards {
	n = min(max(n, 1), countShards)
	s := &shards{slots: make(chan struct{}, n)}
	base := rand.N(countShards)
	for i := range n {
		s.free = append(s.free, (base+n-1-i)%countShards)
	}
	return s
}

func (s *shards) take() int {
	s.slots <- struct{}{}
	s.mu.Lock()
	defer s.mu.Unlock()
	shard := s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	return shard
}

func (s *shards) give(shard int) {
	s.mu.Lock()
	s.free = append(s.free, shard)
	s.mu.Unlock()
	<-s.slots
}
