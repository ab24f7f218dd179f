package postgres

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/tessera-dev/tessera/internal/store"
)

// A node sends its topics to the other nodes only while some may be
// listening: a deployment of one node (the common start) then pays
// nothing for notifications it would only hear itself. Every node's
// listener hears every node's probes (one each probe interval), so a
// healthy listener that heard no other node for a few intervals knows it
// is alone. A node starting says hello, which the others answer at once:
// it knows who listens within a round trip, and sends regardless until
// its probe deadline has passed. It also sends while its own listener is
// unhealthy (it may be deaf to the others). A node that skipped topics
// and then hears another sends a gap: the other's sleepers may have
// missed them, and look again.

// peerTTL is how long a node counts as listening after it was last heard:
// three of the longer of this node's probe interval and the default, and
// a deadline, so a node probing at the default is never forgotten between
// two probes of its.
func peerTTL(every, deadline time.Duration) time.Duration {
	return 3*max(every, probeEvery) + max(deadline, probeDeadline)
}

// peers are the other nodes a listener heard.
type peers struct {
	mu  sync.Mutex
	ttl time.Duration
	// until this node sends regardless: the answers to its hello are
	// not all in.
	until time.Time
	last  map[string]time.Time // by node id
	// skipped: this node did not send some topics, having heard no
	// other node.
	skipped bool
}

func (p *peers) start(now time.Time, ttl, answers time.Duration) {
	p.mu.Lock()
	p.ttl, p.until, p.last = ttl, now.Add(answers), map[string]time.Time{}
	p.mu.Unlock()
}

// heard notes that node was heard at now, and reports whether this node
// skipped topics while it did not know it (nor any other).
func (p *peers) heard(node string, now time.Time) (missed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last[node] = now
	for n, at := range p.last { // forget the gone, so the map stays small
		if now.Sub(at) > p.ttl {
			delete(p.last, n)
		}
	}
	missed, p.skipped = p.skipped, false
	return missed
}

// mayListen reports whether another node may be listening at now; when
// none may, the topics about to go unsent are remembered as skipped.
func (p *peers) mayListen(now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if now.Before(p.until) {
		return true
	}
	for _, at := range p.last {
		if now.Sub(at) <= p.ttl {
			return true
		}
	}
	p.skipped = true
	return false
}

// count is how many other nodes were heard within the TTL.
func (p *peers) count(now time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, at := range p.last {
		if now.Sub(at) <= p.ttl {
			n++
		}
	}
	return n
}

// othersMayListen reports whether this node's topics may have a listener
// on another node: if not, they are not sent.
func (l *listener) othersMayListen() bool {
	return !l.healthy.Load() || l.peers.mayListen(time.Now())
}

// hello tells the other nodes this one listens now, and asks them to say
// they do.
func (l *listener) hello(ctx context.Context) error {
	return l.say(ctx, payload{Node: l.db.node, Hello: true})
}

func (l *listener) say(ctx context.Context, p payload) error {
	b, _ := json.Marshal(p)
	_, err := l.db.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, l.db.channel, string(b))
	return err
}

// hear notes another node's payload: a hello is answered, and a gap is
// sent if topics went unsent while no other node was heard.
func (l *listener) hear(ctx context.Context, p payload) {
	if l.peers.heard(p.Node, time.Now()) {
		l.db.notifier.send([]string{store.TopicGap})
	}
	if p.Hello {
		go func() { // not on the receiving connection's loop
			ctx, cancel := context.WithTimeout(ctx, l.deadline)
			defer cancel()
			if err := l.say(ctx, payload{Node: l.db.node}); err != nil {
				l.db.log.Warn("postgres: cannot answer a node's hello", "err", err)
			}
		}()
	}
}
