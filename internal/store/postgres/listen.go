package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tessera-dev/tessera/internal/store"
)

// Notifications between nodes. A transaction's topics (Tx.Notify) go to
// this node's listener at once after the commit, and to every other node
// through pg_notify, sent after the commit by the node's notifier
// (notify.go). Each node keeps one connection of its own LISTENing on the
// schema's channel, and drops its own echoes by the node id every payload
// carries. Delivery is at most once, as the seam allows: what is sent
// while a node's listening connection is down is lost to it.
//
// A listening connection can also go silent without dropping: its
// backend stopped or a network path lost, TCP still up, nothing arriving,
// and nothing to say so. So the node probes it: every few seconds it
// notifies its own channel from the pool and expects to hear the probe
// back within a deadline. A miss is logged, makes the listener unhealthy
// (ListenerStats; the core then short-polls its long-polls), and drops
// the connection, which is made again as after any drop.

// maxPayload bounds one notification's payload: PostgreSQL refuses 8000
// bytes or more.
const maxPayload = 7900

// payload is what one notification carries. Topics may hold NUL bytes,
// which PostgreSQL text cannot: JSON escapes them.
type payload struct {
	Node   string   `json:"n"`
	Topics []string `json:"t,omitempty"`
	// Probe numbers a node's probe of its own listener.
	Probe int64 `json:"p,omitempty"`
	// Hello is a node's first word, sent as it starts to listen: the
	// nodes that hear it send their topics from then on (peers).
	Hello bool `json:"h,omitempty"`
}

// channelName is the schema's channel: deployments (and parallel tests) in
// other schemas of the database do not hear it. A channel name is an
// identifier of at most 63 bytes, so a long schema name is hashed.
func channelName(schema string) string {
	name := "tessera_" + schema
	if len(name) > 63 {
		sum := sha256.Sum256([]byte(schema))
		name = "tessera_" + hex.EncodeToString(sum[:16])
	}
	return name
}

// payloads packs topics into as few payloads as fit the limit. A topic too
// long to fit even alone is delivered on this node only.
func (db *DB) payloads(topics []string) []string {
	var out []string
	p := payload{Node: db.node}
	flush := func() {
		if len(p.Topics) > 0 {
			b, _ := json.Marshal(p)
			out = append(out, string(b))
			p.Topics = nil
		}
	}
	for _, t := range topics {
		p.Topics = append(p.Topics, t)
		if b, _ := json.Marshal(p); len(b) <= maxPayload {
			continue
		}
		p.Topics = p.Topics[:len(p.Topics)-1]
		flush()
		p.Topics = []string{t}
		if b, _ := json.Marshal(p); len(b) > maxPayload {
			p.Topics = nil
		}
	}
	flush()
	return out
}

// listener holds the node's listening connection and makes it again,
// backing off, whenever it drops or misses a probe.
type listener struct {
	db     *DB
	cancel context.CancelFunc
	done   chan struct{}
	// every and deadline pace the probes: one per every, each to be
	// heard back within deadline of being sent.
	every, deadline time.Duration
	// pid is the backend listening now, 0 while there is none.
	pid atomic.Uint32
	// connects counts the connections made, the first included.
	connects atomic.Int64
	// healthy: connected, and no probe missed since.
	healthy atomic.Bool
	// heard is when the listener last heard a notification (its own
	// probes included), in Unix nanoseconds; at first, when it started.
	heard atomic.Int64
	// echoes carries the probe numbers heard back to the prober.
	echoes chan int64
	// peers are the other nodes heard, by node id, with when each was
	// last heard (peers.go).
	peers peers
	// drop ends the current connection's wait, so it is made again.
	mu   sync.Mutex
	drop context.CancelFunc
}

const (
	minBackoff = 50 * time.Millisecond
	maxBackoff = 5 * time.Second
	// probeEvery and probeDeadline: a silent listener is noticed within
	// about 7 s, and a probe delivered late only under a load that
	// delays NOTIFY by 2 s costs a reconnect and a gap.
	probeEvery    = 5 * time.Second
	probeDeadline = 2 * time.Second
)

// WithListenerProbe sets how often the listening connection is probed and
// how soon each probe must be heard back (defaults 5 s and 2 s).
func WithListenerProbe(every, deadline time.Duration) Option {
	return func(db *DB) { db.probeEvery, db.probeDeadline = every, deadline }
}

// startListener connects and LISTENs before it returns, so every
// notification committed after Open reaches this node.
func startListener(ctx context.Context, db *DB) (*listener, error) {
	l := &listener{db: db, done: make(chan struct{}), every: db.probeEvery, deadline: db.probeDeadline,
		echoes: make(chan int64, 1)}
	conn, err := l.connect(ctx)
	if err != nil {
		return nil, translate(err, false, db.meter)
	}
	l.heard.Store(time.Now().UnixNano())
	l.peers.start(time.Now(), peerTTL(l.every, l.deadline), l.deadline)
	runCtx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	probed := make(chan struct{})
	go func() {
		defer close(probed)
		l.probe(runCtx)
	}()
	go func() {
		l.run(runCtx, conn)
		<-probed
		close(l.done)
	}()
	return l, nil
}

// connect makes a listening connection, named "… listener" in
// pg_stat_activity, within the probe interval: a server that accepts and
// then says nothing is tried again, not waited for.
func (l *listener) connect(ctx context.Context) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, max(l.every, time.Second))
	defer cancel()
	cfg := l.db.pool.Config().ConnConfig.Copy()
	name := cfg.RuntimeParams["application_name"]
	if name == "" {
		name = "tessera"
	}
	cfg.RuntimeParams["application_name"] = name + " listener"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.db.channel}.Sanitize()); err != nil {
		_ = conn.Close(ctx)
		return nil, fmt.Errorf("listen: %w", err)
	}
	l.pid.Store(conn.PgConn().PID())
	l.connects.Add(1)
	l.healthy.Store(true)
	return conn, nil
}

func (l *listener) run(ctx context.Context, conn *pgx.Conn) {
	for {
		connCtx, drop := context.WithCancel(ctx)
		l.mu.Lock()
		l.drop = drop
		l.mu.Unlock()
		err := l.receive(connCtx, conn)
		drop()
		l.pid.Store(0)
		l.healthy.Store(false)
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = conn.Close(closeCtx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		l.db.log.Warn("postgres: the notification connection dropped; reconnecting", "err", err)
		// Long-polls asleep on this node would hear nothing until the
		// connection is back: wake them now, to look again and then
		// short-poll while it is down.
		l.db.deliver(store.TopicGap)
		if conn = l.reconnect(ctx); conn == nil {
			return
		}
		// What other nodes sent while the connection was down is lost:
		// the listener drops what those topics would have kept fresh.
		l.db.deliver(store.TopicGap)
		// Nodes that stopped counting this one while it was deaf count it
		// again now, not at its next probe.
		if err := l.hello(ctx); err != nil {
			l.db.log.Warn("postgres: cannot say hello to the other nodes", "err", err)
		}
	}
}

// receive delivers other nodes' topics, and its own probes to the
// prober, until the connection fails or ctx ends.
func (l *listener) receive(ctx context.Context, conn *pgx.Conn) error {
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		l.heard.Store(time.Now().UnixNano())
		var p payload
		if json.Unmarshal([]byte(n.Payload), &p) != nil {
			continue // not ours to read
		}
		if p.Node != l.db.node {
			l.hear(ctx, p)
		}
		if p.Node == l.db.node {
			if p.Probe > 0 {
				select {
				case <-l.echoes: // an older echo nobody took
				default:
				}
				l.echoes <- p.Probe
			}
			continue // our own echo
		}
		for _, t := range p.Topics {
			l.db.deliver(t)
		}
	}
}

// probe notifies this node's own channel every l.every, from the pool,
// and drops the listening connection when a probe is not heard back
// within l.deadline.
func (l *listener) probe(ctx context.Context) {
	tick := time.NewTicker(l.every)
	defer tick.Stop()
	for n := int64(1); ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		made := l.connects.Load()
		if l.pid.Load() == 0 {
			continue // being made again: nothing to probe
		}
		if l.heardBack(ctx, n) || ctx.Err() != nil {
			continue
		}
		l.mu.Lock()
		// Only the connection probed is dropped, not one made since.
		if l.drop != nil && l.connects.Load() == made {
			// Logged first: whoever sees the listener unhealthy can read why.
			l.db.log.Warn("postgres: the notification connection did not hear its probe back; reconnecting",
				"deadline", l.deadline, "last_heard_ago", time.Since(time.Unix(0, l.heard.Load())).Round(time.Millisecond))
			l.healthy.Store(false)
			l.drop()
		}
		l.mu.Unlock()
	}
}

// heardBack sends probe n and reports whether it came back within the
// deadline of being sent. A probe that cannot be sent in that time (the
// pool cannot reach the database either, or is busy) proves nothing
// about the listener, and counts as heard.
func (l *listener) heardBack(ctx context.Context, n int64) bool {
	b, _ := json.Marshal(payload{Node: l.db.node, Probe: n})
	sendCtx, cancel := context.WithTimeout(ctx, l.deadline)
	_, err := l.db.pool.Exec(sendCtx, `SELECT pg_notify($1, $2)`, l.db.channel, string(b))
	cancel()
	if err != nil {
		return true
	}
	timeout := time.NewTimer(l.deadline)
	defer timeout.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-timeout.C:
			return false
		case heard := <-l.echoes:
			if heard >= n {
				return true
			}
		}
	}
}

// reconnect tries until it connects or ctx ends (nil then), waiting a
// growing, jittered pause between tries.
func (l *listener) reconnect(ctx context.Context) *pgx.Conn {
	for pause := minBackoff; ; pause = min(2*pause, maxBackoff) {
		t := time.NewTimer(pause + rand.N(pause/2))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		conn, err := l.connect(ctx)
		if err == nil {
			return conn
		}
		l.db.log.Warn("postgres: the notification connection cannot be made", "err", err, "retry_in", pause)
	}
}

func (l *listener) stop() {
	l.cancel()
	<-l.done
}

// ListenerStats reports the health of the node's listening connection.
func (db *DB) ListenerStats() store.ListenerStats {
	return store.ListenerStats{Healthy: db.listener.healthy.Load(), LastHeard: time.Unix(0, db.listener.heard.Load()),
		Peers: db.listener.peers.count(time.Now()), Sent: db.notifier.sent.Load()}
}
