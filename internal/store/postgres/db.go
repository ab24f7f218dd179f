// Package postgres is the store for several nodes: a store.Store and
// meter.Ledger over one PostgreSQL (15 or later) database, through pgx's
// pool with statements prepared and cached per connection.
//
// Unlike SQLite, writers here run concurrently, so the seam's guarantees
// rest on the database: a claim picks its task FOR UPDATE SKIP LOCKED in
// the statement that leases it, every other task change is conditional on
// the version read (store.ErrStale), idempotency entries and record heads
// are inserted first-wins with ON CONFLICT DO NOTHING (which waits for a
// concurrent inserter of the key to commit or roll back), and
// serialization failures and deadlocks make Update run its function again
// (store.Retry). Update runs at READ COMMITTED — the conditional writes
// give correctness, and nothing waits on a snapshot — and View at
// REPEATABLE READ READ ONLY, one consistent snapshot.
//
// Everything global lives in the database, in the schema the connection's
// search_path names first (current_schema()): the tables, the meter's day
// totals (meter_days), and the channel on which nodes tell each other of
// committed changes (listen.go).
package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/store/sqlschema"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// DB is a Store over one PostgreSQL schema.
type DB struct {
	pool   *pgxpool.Pool
	meter  *meter.Meter
	log    *slog.Logger
	schema string
	// costs meter each statement by the shape of the table it writes
	// (meter.go); shards are the task counts' shards this node's commits
	// take turns on (counts.go).
	costs  *costs
	shards *shards

	node     string // this node's id, in every notification it sends
	channel  string // the schema's notification channel
	listen   atomic.Pointer[func(string)]
	listener *listener
	notifier *notifier
	// probeEvery and probeDeadline pace the listener's probes.
	probeEvery, probeDeadline time.Duration
	// existing: Open refuses a schema that holds no store yet, instead of
	// making one (the operator tools).
	existing bool

	group *grouper
	// commits counts the write transactions committed, writes the
	// Updates (and blob uploads) they carried (CommitStats).
	commits, writes atomic.Int64
	closeOnce       sync.Once
}

var (
	_ store.Store  = (*DB)(nil)
	_ meter.Ledger = (*DB)(nil)
)

// Option configures Open.
type Option func(*DB)

// Existing makes Open refuse a schema that holds no store yet, instead of
// making one: a tool pointed at the wrong schema says so.
func Existing() Option { return func(db *DB) { db.existing = true } }

// WithLogger sets where the store reports what it recovers from by itself
// (a notification connection that dropped and was made again).
func WithLogger(l *slog.Logger) Option { return func(db *DB) { db.log = l } }

// Open connects to the database at url (postgres://…; pgxpool's pool_*
// parameters apply, search_path picks the schema), brings its schema up
// to date and starts listening for other nodes' notifications. An
// up-to-date schema is opened without a write.
func Open(ctx context.Context, url string, m *meter.Meter, opts ...Option) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns=") { // in a URL's query or a key=value string alike
		cfg.MaxConns = DefaultPoolSize
	}
	// pgxpool's default, and every connection handed to the second
	// attempt of a transaction whose connection broke (attempt).
	cfg.ShouldPing = func(ctx context.Context, p pgxpool.ShouldPingParams) bool {
		return p.IdleDuration > time.Second || ctx.Value(pingFirst{}) != nil
	}
	// Every statement of this store is written to walk an index from a
	// seek, and the meter counts what it walks. PostgreSQL's planner,
	// costing a table that is small or not yet analyzed, takes a
	// sequential scan instead and reads it whole: at every retention pass
	// (an idle worker's day once read 216,000 rows of its own counters
	// that way) and every health read. Off, a scan is only what a
	// statement with no index to use still gets (the count changes
	// gathered in a temporary table); the cost it is charged then would
	// make PostgreSQL compile that statement with JIT at every commit
	// (200 ms each), which an OLTP store never wants anyway.
	for name, value := range map[string]string{"enable_seqscan": "off", "jit": "off"} {
		if _, set := cfg.ConnConfig.RuntimeParams[name]; !set {
			cfg.ConnConfig.RuntimeParams[name] = value
		}
	}
	db := &DB{meter: m, log: slog.New(slog.DiscardHandler), node: tessera.RandomToken(12),
		probeEvery: probeEvery, probeDeadline: probeDeadline}
	for _, o := range opts {
		o(db)
	}
	if db.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, translate(fmt.Errorf("postgres: %w", err), false, m)
	}
	if err := db.start(ctx); err != nil {
		db.pool.Close()
		return nil, err
	}
	return db, nil
}

// DefaultPoolSize is the pool's size when the URL does not set
// pool_max_conns: one node serving 16 workers did the most work with 16
// (docs/design.md, "PostgreSQL"); with several nodes, size it down
// (docs/operations.md).
const DefaultPoolSize = 16

func (db *DB) start(ctx context.Context) error {
	var searchPath string
	if err := db.pool.QueryRow(ctx, `SELECT coalesce(current_schema(), ''), current_setting('search_path')`).Scan(&db.schema, &searchPath); err != nil {
		return translate(fmt.Errorf("postgres: %w", err), false, db.meter)
	}
	if db.schema == "" {
		// The store does not create the schema: which one, and who may
		// own it, is the operator's choice.
		return fmt.Errorf("postgres: no schema of the search_path (%s) exists: create it first (CREATE SCHEMA %s;), or set search_path in the URL to one that exists", searchPath, schemaToCreate(searchPath))
	}
	if err := db.migrate(ctx); err != nil {
		return err
	}
	shapes, err := readShapes(ctx, db.pool)
	if err != nil {
		return fmt.Errorf("postgres: read the schema's indexes: %w", err)
	}
	db.costs = &costs{shapes: shapes}
	db.shards = newShards(int(db.pool.Config().MaxConns))
	db.channel = channelName(db.schema)
	db.notifier = startNotifier(db)
	db.group = startGrouper(db, committers(int(db.pool.Config().MaxConns)))
	if db.listener, err = startListener(ctx, db); err != nil {
		db.notifier.close()
		return err
	}
	if err := db.listener.hello(ctx); err != nil {
		db.Close()
		return translate(fmt.Errorf("postgres: notify: %w", err), false, db.meter)
	}
	return nil
}

// schemaToCreate is the schema a search_path names first (not "$user"),
// as CREATE SCHEMA would take it.
func schemaToCreate(searchPath string) string {
	for _, s := range strings.Split(searchPath, ",") {
		if s = strings.TrimSpace(s); s != "" && s != `"$user"` && s != "$user" {
			return s
		}
	}
	return "tessera"
}

// Where names the database and schema the store lives in, for a start
// line: host, port, database and schema, never the password.
func (db *DB) Where() string {
	c := db.pool.Config().ConnConfig
	return fmt.Sprintf("postgres host=%s port=%d database=%s schema=%s", c.Host, c.Port, c.Database, db.schema)
}

// Close stops listening and closes every connection; in-flight
// transactions finish first.
func (db *DB) Close() error {
	db.closeOnce.Do(func() {
		db.group.close()
		db.notifier.close()
		db.listener.stop()
		db.pool.Close()
	})
	return nil
}

// CommitStats reports the write transactions committed and the Updates
// they carried: more Updates than commits is group commit at work.
// PostgreSQL makes commits durable itself, so nothing of syncing.
func (db *DB) CommitStats() store.CommitStats {
	return store.CommitStats{Commits: db.commits.Load(), Writes: db.writes.Load()}
}

// Listen sets the receiver of notified topics: this node's at once after
// its commit, the other nodes' as their notifications arrive.
func (db *DB) Listen(fn func(topic string)) { db.listen.Store(&fn) }

func (db *DB) deliver(topic string) {
	if fn := db.listen.Load(); fn != nil {
		(*fn)(topic)
	}
}

// Update runs fn in a READ COMMITTED transaction, again when fn or the
// database reports a lost race (store.ErrRetry), and delivers its topics
// once it committed: to this node's listener at once, to the other nodes
// through the notifier (notify.go). While the storage allowance refuses writes (SPEC
// §13) the transaction is READ ONLY: PostgreSQL itself refuses every
// write-capable statement, and that refusal answers as the quota error.
//
// Updates that run at once share transactions (group.go); one that runs
// again after a lost race runs in a transaction of its own.
func (db *DB) Update(ctx context.Context, fn func(store.Tx) error) error {
	var topics []string
	first := true
	err := store.Retry(ctx, func() (err error) {
		if first {
			first = false
			if again, err := db.group.update(ctx, fn); !again {
				return err // the committer told its topics
			}
		}
		topics, err = db.attempt(ctx, false, fn)
		return err
	})
	if err == nil {
		db.delivered(topics)
	}
	return err
}

// delivered tells the topics of a committed transaction: to this node at
// once, to the others through the notifier.
func (db *DB) delivered(topics []string) {
	for _, t := range topics {
		db.deliver(t)
	}
	if db.listener.othersMayListen() {
		db.notifier.send(topics)
	}
}

// View runs fn in a REPEATABLE READ READ ONLY transaction: one snapshot.
func (db *DB) View(ctx context.Context, fn func(store.Tx) error) error {
	_, err := db.attempt(ctx, true, fn)
	return err
}

// pingFirst marks the context of an attempt whose connection must be
// pinged before it is used.
type pingFirst struct{}

// attempt runs a transaction, and once more when its connection broke
// before its COMMIT could reach the server: such a transaction provably
// did not commit, so running it again does nothing twice. That is what
// the first request to draw a pooled connection left over from before a
// database restart meets (the pool pings only connections idle for a
// second). The second run's connection is pinged first, so a stale one
// is dropped, not used. A broken connection during the COMMIT itself is
// not retried: the commit may have happened (outcomeUnknown).
func (db *DB) attempt(ctx context.Context, view bool, fn func(store.Tx) error) ([]string, error) {
	topics, lost, err := db.run(ctx, view, fn)
	if lost && ctx.Err() == nil {
		db.log.Info("postgres: a transaction's connection broke before its commit; running it again on another", "err", err)
		topics, _, err = db.run(context.WithValue(ctx, pingFirst{}, true), view, fn)
	}
	return topics, err
}

// run is one attempt of a transaction: fn, its statements sent with
// BEGIN in front of the first, then in one round trip the writes still
// waiting, the task counts it changed and COMMIT. lost reports that it
// failed because its connection broke before anything of its COMMIT was
// sent (or, read-only, at any point): it did not commit.
func (db *DB) run(ctx context.Context, view bool, fn func(store.Tx) error) (topics []string, lost bool, err error) {
	if err := db.meter.ReadRefusal(); err != nil {
		return nil, false, err
	}
	refusing := !view && db.meter.WriteRefusal() != nil
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return nil, false, translate(fmt.Errorf("postgres: acquire: %w", err), false, db.meter)
	}
	defer conn.Release()
	c := conn.Conn()
	// A connection closed by a failure holds no transaction any more: the
	// server rolled back whatever it had done.
	broke := func() bool { return c.IsClosed() }
	begin := "BEGIN ISOLATION LEVEL READ COMMITTED"
	switch {
	case view:
		begin = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
	case refusing:
		begin = "BEGIN ISOLATION LEVEL READ COMMITTED READ ONLY"
	}
	t := &tx{db: db, c: c, readOnly: view || refusing, refusing: refusing, later: []later{{sql: begin}}, counts: countChanges{}}
	done := false
	defer func() {
		if !done { // fn panicked: nothing it did stays
			rollback(c)
		}
	}()
	if err := fn(t); err != nil {
		// Rows it read were read; rows it wrote are undone and cost nothing.
		db.meter.Add(ctx, 0, t.tally.read)
		rollback(c)
		done = true
		return nil, broke(), err
	}
	if view {
		t.topics = nil // a View changed nothing to tell anyone of
	}
	err = t.commit(ctx)
	done = true
	if err != nil {
		switch {
		case pgconn.SafeToRetry(err), t.readOnly && broke():
			// Nothing of the commit was sent, or nothing was to commit.
			return nil, true, translate(err, refusing, db.meter)
		case broke() && ctx.Err() == nil:
			return nil, false, outcomeUnknown(err)
		}
		return nil, false, translate(err, refusing, db.meter)
	}
	db.meter.Add(ctx, t.tally.written, t.tally.read)
	if t.committed {
		db.writes.Add(1)
	}
	return t.topics, false, nil
}

// rollback ends a transaction that will not commit, if one was begun. A
// connection it cannot roll back is closed, and the pool drops it.
func rollback(c *pgx.Conn) {
	if c.IsClosed() || c.PgConn().TxStatus() == 'I' {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Exec(ctx, "ROLLBACK"); err != nil {
		_ = c.Close(ctx)
	}
}

// commit sends, in one round trip, what waits (the BEGIN of a transaction
// that sent nothing yet, writes nothing waited for), the task counts the
// transaction changed, on a shard of this node's (counts.go), and COMMIT.
// A transaction that never sent a statement has nothing to commit. A
// failed COMMIT rolls back by itself; a failed statement before it leaves
// the transaction to roll back.
func (t *tx) commit(ctx context.Context) error {
	if len(t.later) == 1 && t.later[0].cost == nil && len(t.counts) == 0 {
		return nil // BEGIN alone: nothing was sent
	}
	if !t.readOnly && len(t.counts) > 0 {
		shard := t.db.shards.take()
		defer t.db.shards.give(shard)
		if args := t.counts.args(shard); args != nil {
			t.queue(countsUpsert, args...)
		}
	}
	_, err := t.send(ctx, "COMMIT", nil, nil)
	if err != nil {
		rollback(t.c)
		return fmt.Errorf("postgres: commit: %w", err)
	}
	if !t.readOnly {
		t.committed = true
		t.db.commits.Add(1)
	}
	return nil
}

// tx implements store.Tx on the connection that holds the transaction.
type tx struct {
	db *DB
	c  *pgx.Conn
	// readOnly: a View, or an Update while writes are refused.
	readOnly, refusing bool
	topics             []string // notified when the transaction commits
	// later are statements that go in front of the next one sent, in
	// order, in its round trip: the BEGIN until then, and writes whose
	// results nothing waits for (queue).
	later  []later
	tally  tally
	counts countChanges
	// ctx, when set, is the context of every statement instead of the
	// caller's: a batch's (group.go). sends counts the round trips.
	ctx   context.Context
	sends int
	// committed: a write transaction's COMMIT went through.
	committed bool
}

// later is a statement sent with the next round trip; cost nil is the
// BEGIN, which the meter does not count.
type later struct {
	sql  string
	args []any
	cost *cost
}

var _ store.Tx = (*tx)(nil)

func (t *tx) Notify(_ context.Context, topic string) {
	if !slices.Contains(t.topics, topic) {
		t.topics = append(t.topics, topic)
	}
}

// guard is the allowance check of every statement (SPEC §13): once the
// read allowance is spent nothing runs. (The written allowance is the
// transaction's READ ONLY mode, decided at BEGIN.)
func (t *tx) guard() error { return t.db.meter.ReadRefusal() }

// queue adds a write to be sent in front of the next statement: one whose
// rows nothing in the transaction waits for and whose failure may as well
// surface then (it fails the transaction all the same). It saves the
// write its round trip.
func (t *tx) queue(sql string, args ...any) {
	k := t.db.costs.of(sql)
	t.later = append(t.later, later{sql: k.sent(sql), args: args, cost: k})
}

// roundTrip sends what waits and then sql, in one round trip, and reads
// their results in order: each is called for every row sql returns. It
// returns the rows sql changed, or returned when it changes none. Every
// result is metered.
func (t *tx) roundTrip(ctx context.Context, sql string, args []any, each func(pgx.Rows) error) (int64, error) {
	if err := t.guard(); err != nil {
		return 0, err
	}
	return t.send(ctx, sql, args, each)
}

// send is roundTrip without the allowance check: the COMMIT's.
func (t *tx) send(ctx context.Context, sql string, args []any, each func(pgx.Rows) error) (int64, error) {
	if t.ctx != nil {
		ctx = t.ctx
	}
	t.sends++
	if len(t.later) == 0 {
		k := t.db.costs.of(sql)
		rows, err := t.c.Query(ctx, k.sent(sql), args...)
		if err != nil {
			return 0, t.translate(sql, err)
		}
		return t.result(sql, k, rows, each)
	}
	n, err := t.batch(ctx, []statement{{sql, args}}, each)
	if err != nil {
		return 0, err
	}
	return n[0], nil
}

// statement is one of several sent in one round trip.
type statement struct {
	sql  string
	args []any
}

// roundTripAll is roundTrip of several statements: what waits and then
// stmts go in one round trip, and it returns the rows each of stmts
// changed (or returned). Its first failure fails it.
func (t *tx) roundTripAll(ctx context.Context, stmts []statement) ([]int64, error) {
	if err := t.guard(); err != nil {
		return nil, err
	}
	if t.ctx != nil {
		ctx = t.ctx
	}
	t.sends++
	return t.batch(ctx, stmts, nil)
}

// batch sends what waits and then stmts as one pgx batch, and reads their
// results in order; each is called for every row the last statement
// returns.
func (t *tx) batch(ctx context.Context, stmts []statement, each func(pgx.Rows) error) ([]int64, error) {
	b := &pgx.Batch{}
	for _, l := range t.later {
		b.Queue(l.sql, l.args...)
	}
	costs := make([]*cost, len(stmts))
	for i, st := range stmts {
		costs[i] = t.db.costs.of(st.sql)
		b.Queue(costs[i].sent(st.sql), st.args...)
	}
	waiting := t.later
	t.later = nil
	br := t.c.SendBatch(ctx, b)
	n, err := t.results(stmts, costs, br, waiting, each)
	if closeErr := br.Close(); err == nil && closeErr != nil {
		err = t.translate(stmts[len(stmts)-1].sql, closeErr)
	}
	return n, err
}

// results reads a batch's results: the statements that waited, then
// stmts'.
func (t *tx) results(stmts []statement, costs []*cost, br pgx.BatchResults, waiting []later, each func(pgx.Rows) error) ([]int64, error) {
	for _, l := range waiting {
		rows, err := br.Query()
		if err != nil {
			return nil, t.translate(l.sql, err)
		}
		if l.cost == nil { // the BEGIN
			rows.Close()
			if err := rows.Err(); err != nil {
				return nil, t.translate(l.sql, err)
			}
			continue
		}
		if _, err := t.result(l.sql, l.cost, rows, nil); err != nil {
			return nil, err
		}
	}
	n := make([]int64, len(stmts))
	for i, st := range stmts {
		rows, err := br.Query()
		if err != nil {
			return nil, t.translate(st.sql, err)
		}
		var rowEach func(pgx.Rows) error
		if i == len(stmts)-1 {
			rowEach = each
		}
		if n[i], err = t.result(st.sql, costs[i], rows, rowEach); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// result reads the rows of a statement of cost k, calling each for
// every one, meters them, and returns the rows it changed (or returned,
// when it changes none).
func (t *tx) result(sql string, k *cost, rows pgx.Rows, each func(pgx.Rows) error) (int64, error) {
	var returned, inserted int64
	var eachErr error
	for eachErr == nil && rows.Next() {
		returned++
		switch {
		case k.upsert:
			var ins bool
			if eachErr = rows.Scan(&ins); eachErr == nil && ins {
				inserted++
			}
		case each != nil:
			eachErr = each(rows)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil || eachErr != nil {
		if k.verb == 'S' {
			t.tally.returned(k, returned) // read all the same
		}
		if err != nil {
			return 0, t.translate(sql, err)
		}
		return 0, eachErr
	}
	switch {
	case k.upsert:
		t.tally.upserted(k, inserted, returned-inserted)
		t.tally.conflicted(k, returned)
		return returned, nil
	case k.verb == 'S':
		t.tally.returned(k, returned)
		return returned, nil
	}
	changed := rows.CommandTag().RowsAffected()
	t.tally.returned(k, changed)
	if k.verb == 'I' {
		t.tally.conflicted(k, changed)
	}
	return changed, nil
}

// query runs one statement, calling each for every row it returns.
func (t *tx) query(ctx context.Context, sql string, args []any, each func(pgx.Rows) error) error {
	_, err := t.roundTrip(ctx, sql, args, each)
	return err
}

// one runs a query expected to return at most one row, scanning it into
// dest; ErrNotFound if there is none.
func (t *tx) one(ctx context.Context, sql string, args []any, dest ...any) error {
	n, err := t.roundTrip(ctx, sql, args, func(r pgx.Rows) error { return r.Scan(dest...) })
	if err == nil && n == 0 {
		return store.ErrNotFound
	}
	return err
}

// oneRow is one for a row read by a scan function.
func oneRow[T any](ctx context.Context, t *tx, sql string, args []any, scan func(pgx.Row) (T, error)) (*T, error) {
	var v T
	n, err := t.roundTrip(ctx, sql, args, func(r pgx.Rows) (err error) {
		v, err = scan(r)
		return err
	})
	if err == nil && n == 0 {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return &v, nil
}

// countRows runs a statement whose first column counts rows it read
// (SELECT count(*) …), scanning it into n and the rest into more: the
// meter counts the rows it counted, not the one it returned.
func (t *tx) countRows(ctx context.Context, sql string, args []any, n *int64, more ...any) error {
	if err := t.one(ctx, sql, args, append([]any{n}, more...)...); err != nil {
		return err
	}
	t.tally.read += *n - 1
	return nil
}

// exec runs one statement and returns how many rows it changed.
func (t *tx) exec(ctx context.Context, sql string, args ...any) (int64, error) {
	return t.roundTrip(ctx, sql, args, nil)
}

// insert runs an INSERT … ON CONFLICT DO NOTHING, and reports one that
// inserted nothing as ErrConflict. Inserts that may collide are written
// so: the transaction stays usable after a collision, as in SQLite, and a
// concurrent insert of the same key is waited for, not raced.
func (t *tx) insert(ctx context.Context, what, sql string, args ...any) error {
	n, err := t.exec(ctx, sql, args...)
	if err == nil && n == 0 {
		err = store.ErrConflict
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

func (t *tx) translate(sql string, err error) error {
	if err == nil {
		return nil
	}
	return translate(fmt.Errorf("%s: %w", firstLine(sql), err), t.refusing, t.db.meter)
}

// unavailableAfter is the Retry-After of an answer the database could not
// give for now (disk full, connection lost, server shutting down).
const unavailableAfter = 5 * time.Second

// translate maps the PostgreSQL errors the domain cares about onto store
// errors and client errors. refusing says the transaction is READ ONLY
// because the allowance refuses writes.
func translate(err error, refusing bool, m *meter.Meter) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "40001" || pe.Code == "40P01": // serialization failure, deadlock
			return fmt.Errorf("%w: %w", store.ErrRetry, err)
		case pe.Code == "23505": // unique violation
			return fmt.Errorf("%w: %w", store.ErrConflict, err)
		case pe.Code == "25006" && refusing: // read-only transaction
			if q := m.WriteRefusal(); q != nil {
				return errors.Join(q, err)
			}
			return errors.Join(meter.QuotaError(time.Now()), err)
		case pe.Code == "22021" || pe.Code == "22P05": // a NUL byte or invalid UTF-8 in text
			return errors.Join(tessera.Errorf(tessera.CodeInvalidRequest,
				"the request holds text PostgreSQL cannot store (a NUL character or invalid UTF-8)"), err)
		case pe.Code == "25006", // a read-only server: a standby, or default_transaction_read_only
			strings.HasPrefix(pe.Code, "53"),  // insufficient resources: disk full, out of memory, too many connections
			strings.HasPrefix(pe.Code, "08"),  // connection exception
			strings.HasPrefix(pe.Code, "57P"): // shutting down, cannot connect now
			return unavailable(err)
		}
		return err
	}
	if isConnectionFailure(err) {
		return unavailable(err)
	}
	return err
}

// outcomeUnknown is the answer to a commit whose connection broke after
// the COMMIT may have reached the server: it may have committed or not.
// It is never retried here; the client's retry with its Idempotency-Key
// finds the first answer if it did.
func outcomeUnknown(err error) error {
	return store.Unavailable("the connection to the database broke while committing; outcome unknown; retry with the same Idempotency-Key",
		unavailableAfter+rand.N(time.Second), err)
}

func unavailable(err error) error {
	return store.Unavailable("the database cannot answer right now; nothing was changed unless a retry finds it done",
		unavailableAfter+rand.N(time.Second), err)
}

// isConnectionFailure reports whether err says the database could not be
// reached or the connection broke, as opposed to a statement's error.
func isConnectionFailure(err error) bool {
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}

// The statement helpers both backends share (package sqlschema).
var (
	firstLine  = sqlschema.FirstLine
	mustChange = sqlschema.MustChange
	nullable   = sqlschema.Nullable
)
