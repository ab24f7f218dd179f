package postgres

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tessera-dev/tessera/internal/store"
)

// The sending half of notifications between nodes. A transaction's topics
// are not sent with pg_notify inside it: PostgreSQL serializes the commits
// of every notifying transaction of the cluster on one lock, held through
// each one's WAL flush, so under load the commits that notify ran one at a
// time (issue 37: 65 of 114 sampled COMMITs waited on that lock). Instead a
// committed transaction hands its topics to the node's notifier, which
// sends whatever gathered meanwhile as one transaction of its own, topics
// coalesced, and sends again once that one is done and notifyGap has
// passed: one notifying commit in flight per node, whatever the load, and
// a wake-up reaches the other nodes a round trip (and at most notifyGap)
// after the commit that caused it. Nodes send only while another may
// listen (peers.go).
//
// The notifier's transaction commits with synchronous_commit off: it
// writes nothing but the notification queue, and a crash can lose its
// topics either way (delivery is at most once), so it need not wait for a
// WAL flush.

// notifyGap is the least time between two sends of a node: every listener
// of every node (its own included) wakes for each, so under load a send
// carries what a few milliseconds of commits notified, a delay well
// inside the 100 ms a long-poll on another node may take to wake.
const notifyGap = 5 * time.Millisecond

// maxPending bounds the topics a notifier holds while it cannot send
// (the database unreachable): past it, the other nodes are sent one
// TopicGap instead, which makes them drop their caches and look again.
const maxPending = 4096

// notifier sends a node's committed topics to the other nodes.
type notifier struct {
	db      *DB
	pending chan []string
	quit    chan struct{}
	done    chan struct{}
	// sent counts the notifications sent.
	sent atomic.Int64
	// gathered are the topics of the next send, in the order they came
	// (set: the same), or one TopicGap when there were too many.
	gathered []string
	set      map[string]bool
}

func startNotifier(db *DB) *notifier {
	n := &notifier{db: db, pending: make(chan []string, 1024), quit: make(chan struct{}), done: make(chan struct{}),
		set: map[string]bool{}}
	go n.run()
	return n
}

// send queues the topics of a transaction that committed. It never
// blocks the committer: with the queue full, the other nodes get a gap.
func (n *notifier) send(topics []string) {
	if len(topics) == 0 {
		return
	}
	select {
	case n.pending <- topics:
	default:
		select {
		case n.pending <- []string{store.TopicGap}:
		default: // full of sends still to come: the gap rides with the first that can take it
		}
	}
}

func (n *notifier) run() {
	defer close(n.done)
	for {
		if len(n.gathered) == 0 {
			select {
			case <-n.quit:
				return
			case topics := <-n.pending:
				n.add(topics)
			}
		}
		n.drain()
		sent := time.Now()
		for pause := minBackoff; ; pause = min(2*pause, maxBackoff) {
			err := n.notify(n.gathered)
			if err == nil {
				break
			}
			// Kept, and sent once the database answers again.
			n.db.log.Warn("postgres: cannot notify the other nodes; trying again", "err", err, "retry_in", pause)
			select {
			case <-n.quit:
				return
			case <-time.After(pause):
			}
			n.drain()
		}
		clear(n.set)
		n.gathered = n.gathered[:0]
		// What commits meanwhile waits for the next send: under load,
		// one notification a notifyGap carries them all.
		if wait := notifyGap - time.Since(sent); wait > 0 {
			select {
			case <-n.quit:
				return
			case <-time.After(wait):
			}
		}
	}
}

// drain adds every send queued meanwhile to the next one.
func (n *notifier) drain() {
	for {
		select {
		case topics := <-n.pending:
			n.add(topics)
		default:
			return
		}
	}
}

func (n *notifier) add(topics []string) {
	for _, t := range topics {
		switch {
		case n.set[t]:
		case t == store.TopicGap || len(n.gathered) >= maxPending:
			clear(n.set)
			n.gathered = append(n.gathered[:0], store.TopicGap)
			n.set[store.TopicGap] = true
		default:
			n.set[t] = true
			n.gathered = append(n.gathered, t)
		}
	}
}

// notify sends topics in one transaction, as few payloads as they fit:
// a batch is one implicit transaction, and set_config's local setting
// holds until its commit.
func (n *notifier) notify(topics []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b := &pgx.Batch{}
	b.Queue(`SELECT set_config('synchronous_commit', 'off', true)`)
	payloads := n.db.payloads(topics)
	for _, p := range payloads {
		b.Queue(`SELECT pg_notify($1, $2)`, n.db.channel, p)
	}
	if err := n.db.pool.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	n.sent.Add(int64(len(payloads)))
	return nil
}

// close sends what was queued before it and stops; a send the database
// does not take at once is given up.
func (n *notifier) close() {
	close(n.quit)
	<-n.done
	n.drain()
	if len(n.gathered) > 0 {
		_ = n.notify(n.gathered)
	}
}
