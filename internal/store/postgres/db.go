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
	// statsSQL reads the current transaction's row counts of this schema's
	// tables, each table's written rows weighted by its indexes (meter.go).
	statsSQL string

	node     string // this node's id, in every notification it sends
	channel  string // the schema's notification channel
	listen   atomic.Pointer[func(string)]
	listener *listener
	// probeEvery and probeDeadline pace the listener's probes.
	probeEvery, probeDeadline time.Duration

	closeOnce sync.Once
}

var (
	_ store.Store  = (*DB)(nil)
	_ meter.Ledger = (*DB)(nil)
)

// Option configures Open.
type Option func(*DB)

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
// pool_max_conns: enough for a node's concurrent claims on two cores to
// overlap their round trips (docs/design.md, "PostgreSQL").
const DefaultPoolSize = 8

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
	var err error
	if db.statsSQL, err = readStatsSQL(ctx, db.pool); err != nil {
		return fmt.Errorf("postgres: read the schema's indexes: %w", err)
	}
	db.channel = channelName(db.schema)
	db.listener, err = startListener(ctx, db)
	return err
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
		db.listener.stop()
		db.pool.Close()
	})
	return nil
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
// once it committed. While the storage allowance refuses writes (SPEC
// §13) the transaction is READ ONLY: PostgreSQL itself refuses every
// write-capable statement, and that refusal answers as the quota error.
func (db *DB) Update(ctx context.Context, fn func(store.Tx) error) error {
	var topics []string
	err := store.Retry(ctx, func() (err error) {
		topics, err = db.attempt(ctx, false, fn)
		return err
	})
	if err == nil {
		for _, t := range topics {
			db.deliver(t)
		}
	}
	return err
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

// run is one attempt of a transaction: BEGIN, fn, then in one round trip
// the notifications, the meter's row counts and COMMIT. lost reports that
// it failed because its connection broke before anything of its COMMIT
// was sent (or, read-only, at any point): it did not commit.
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
	// A connection closed by a failure holds no transaction any more: the
	// server rolled back whatever it had done.
	broke := func() bool { return conn.Conn().IsClosed() }
	begin := "BEGIN ISOLATION LEVEL READ COMMITTED"
	switch {
	case view:
		begin = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
	case refusing:
		begin = "BEGIN ISOLATION LEVEL READ COMMITTED READ ONLY"
	}
	// The meter's counters are read at the start and again at the end:
	// PostgreSQL 15's per-transaction counters also hold the connection's
	// earlier transactions until it reports them (when idle, at most once a
	// second), so a transaction's rows are the difference. No report can
	// fall between the two: the connection is never idle in a transaction.
	var start counts
	b := &pgx.Batch{}
	b.Queue(begin)
	b.Queue(db.statsSQL).QueryRow(start.scan)
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		rollback(conn.Conn())
		return nil, broke(), translate(fmt.Errorf("postgres: begin: %w", err), refusing, db.meter)
	}
	t := &tx{db: db, c: conn.Conn(), readOnly: view || refusing, refusing: refusing}
	done := false
	defer func() {
		if !done { // fn panicked: nothing it did stays
			rollback(conn.Conn())
		}
	}()
	if err := fn(t); err != nil {
		db.countFailed(ctx, conn.Conn(), start)
		rollback(conn.Conn())
		done = true
		return nil, broke(), err
	}
	if view {
		t.topics = nil // a View changed nothing to tell anyone of
	}
	end, err := db.commit(ctx, conn.Conn(), !t.readOnly, t.topics)
	done = true
	if err != nil {
		err = fmt.Errorf("postgres: commit: %w", err)
		switch {
		case pgconn.SafeToRetry(err), t.readOnly && broke():
			// Nothing of the commit was sent, or nothing was to commit.
			return nil, true, translate(err, refusing, db.meter)
		case broke() && ctx.Err() == nil:
			return nil, false, outcomeUnknown(err)
		}
		return nil, false, translate(err, refusing, db.meter)
	}
	db.meter.Add(ctx, end.written-start.written, end.read-start.read)
	return t.topics, false, nil
}

// counts are the meter's counters of a connection (readStatsSQL).
type counts struct{ written, read int64 }

func (c *counts) scan(r pgx.Row) error { return r.Scan(&c.written, &c.read) }

// rollback ends a transaction that will not commit. A connection it cannot
// roll back is closed, and the pool drops it.
func rollback(c *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Exec(ctx, "ROLLBACK"); err != nil {
		_ = c.Close(ctx)
	}
}

// commit sends the transaction's notifications, writes the task counts it
// gathered (migration 0006: deferred triggers, fired here so the meter
// sees their writes), reads the meter's counters and commits, in one round
// trip. A failed COMMIT rolls back by itself.
func (db *DB) commit(ctx context.Context, c *pgx.Conn, writable bool, topics []string) (counts, error) {
	var end counts
	b := &pgx.Batch{}
	for _, payload := range db.payloads(topics) {
		b.Queue(`SELECT pg_notify($1, $2)`, db.channel, payload)
	}
	if writable {
		b.Queue("SET CONSTRAINTS ALL IMMEDIATE")
	}
	b.Queue(db.statsSQL).QueryRow(end.scan)
	b.Queue("COMMIT")
	if err := c.SendBatch(ctx, b).Close(); err != nil {
		rollback(c)
		return end, err
	}
	return end, nil
}

// countFailed meters the rows a transaction that will roll back has read,
// when it can still say (its function failed with an error of its own, not
// a statement's); rows it wrote are undone and cost nothing. The caller
// rolls back.
func (db *DB) countFailed(ctx context.Context, c *pgx.Conn, start counts) {
	if c.PgConn().TxStatus() != 'T' {
		return // aborted by a failed statement: the counters are out of reach
	}
	var end counts
	if end.scan(c.QueryRow(ctx, db.statsSQL)) == nil {
		db.meter.Add(ctx, 0, end.read-start.read)
	}
}

// tx implements store.Tx on the connection that holds the transaction.
type tx struct {
	db *DB
	c  *pgx.Conn
	// readOnly: a View, or an Update while writes are refused.
	readOnly, refusing bool
	topics             []string // notified when the transaction commits
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

// query runs one statement, calling each for every row it returns.
func (t *tx) query(ctx context.Context, sql string, args []any, each func(pgx.Rows) error) error {
	if err := t.guard(); err != nil {
		return err
	}
	rows, err := t.c.Query(ctx, sql, args...)
	if err != nil {
		return t.translate(sql, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return t.translate(sql, err)
	}
	return nil
}

// one runs a query expected to return at most one row, scanning it into
// dest; ErrNotFound if there is none.
func (t *tx) one(ctx context.Context, sql string, args []any, dest ...any) error {
	_, err := oneRow(ctx, t, sql, args, func(r pgx.Row) (struct{}, error) { return struct{}{}, r.Scan(dest...) })
	return err
}

// oneRow is one for a row read by a scan function.
func oneRow[T any](ctx context.Context, t *tx, sql string, args []any, scan func(pgx.Row) (T, error)) (*T, error) {
	if err := t.guard(); err != nil {
		return nil, err
	}
	v, err := scan(t.c.QueryRow(ctx, sql, args...))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, t.translate(sql, err)
	}
	return &v, nil
}

// exec runs one statement and returns how many rows it changed.
func (t *tx) exec(ctx context.Context, sql string, args ...any) (int64, error) {
	if err := t.guard(); err != nil {
		return 0, err
	}
	tag, err := t.c.Exec(ctx, sql, args...)
	if err != nil {
		return 0, t.translate(sql, err)
	}
	return tag.RowsAffected(), nil
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
