package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tessera-dev/tessera/internal/store"
)

// Notifications between nodes. A transaction's topics (Tx.Notify) go to
// this node's listener at once after the commit, and to every other node
// through pg_notify, sent inside the transaction so PostgreSQL delivers
// them only if it commits. Each node keeps one connection of its own
// LISTENing on the schema's channel, and drops its own echoes by the node
// id every payload carries. Delivery is at most once, as the seam allows:
// what is sent while a node's listening connection is down is lost to it.

// maxPayload bounds one notification's payload: PostgreSQL refuses 8000
// bytes or more.
const maxPayload = 7900

// payload is what one notification carries. Topics may hold NUL bytes,
// which PostgreSQL text cannot: JSON escapes them.
type payload struct {
	Node   string   `json:"n"`
	Topics []string `json:"t"`
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
// backing off, whenever it drops.
type listener struct {
	db     *DB
	cancel context.CancelFunc
	done   chan struct{}
	// pid is the backend listening now, 0 while there is none.
	pid atomic.Uint32
	// connects counts the connections made, the first included.
	connects atomic.Int64
}

const (
	minBackoff = 50 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// startListener connects and LISTENs before it returns, so every
// notification committed after Open reaches this node.
func startListener(ctx context.Context, db *DB) (*listener, error) {
	l := &listener{db: db, done: make(chan struct{})}
	conn, err := l.connect(ctx)
	if err != nil {
		return nil, translate(err, false, db.meter)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	go l.run(runCtx, conn)
	return l, nil
}

func (l *listener) connect(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, l.db.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.db.channel}.Sanitize()); err != nil {
		_ = conn.Close(ctx)
		return nil, err
	}
	l.pid.Store(conn.PgConn().PID())
	l.connects.Add(1)
	return conn, nil
}

func (l *listener) run(ctx context.Context, conn *pgx.Conn) {
	defer close(l.done)
	for {
		err := l.receive(ctx, conn)
		l.pid.Store(0)
		_ = conn.Close(context.Background())
		if ctx.Err() != nil {
			return
		}
		l.db.log.Warn("postgres: the notification connection dropped; reconnecting", "err", err)
		if conn = l.reconnect(ctx); conn == nil {
			return
		}
		// What other nodes sent while the connection was down is lost:
		// the listener drops what those topics would have kept fresh.
		l.db.deliver(store.TopicGap)
	}
}

// receive delivers other nodes' topics until the connection fails.
func (l *listener) receive(ctx context.Context, conn *pgx.Conn) error {
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		var p payload
		if json.Unmarshal([]byte(n.Payload), &p) != nil || p.Node == l.db.node {
			continue // not ours to read, or our own echo
		}
		for _, t := range p.Topics {
			l.db.deliver(t)
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
