// Package sqlite is the embedded store: one SQLite file in WAL mode, used
// through the ncruces driver's direct API so every statement passes one
// place that meters rows (preupdate hook, rows stepped, full-scan steps)
// and enforces the storage allowance.
//
// Writes go through a single connection, owned by one goroutine that
// commits the transactions queued for it together (commit.go). SQLite has
// one writer anyway; serializing in process avoids busy retries, and it is
// why this backend needs no row locks: a claim's single UPDATE picks and
// leases its task with no other writer in between. The seam's conditional
// writes (store.ErrStale) therefore never fail here; they are for backends
// with concurrent writers. Reads use a small pool of query-only
// connections that see WAL snapshots and never wait for the writer.
package sqlite

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/tessera-dev/tessera/internal/fsync"
	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/store/sqlschema"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

const readers = 4

// DB is a Store over one SQLite file.
type DB struct {
	meter *meter.Meter

	// writer is the committer's own connection once Open returns.
	writer  *conn
	writes  chan *writeReq
	stop    chan struct{}
	stopped chan struct{}
	// closed, set by Close under closing's write lock, stops submit from
	// queueing writes (commit.go).
	closing sync.RWMutex
	closed  bool
	started bool // the committer runs
	once    sync.Once
	// opened counts the reader connections made.
	opened int
	// commits counts committed write transactions (commit.go).
	commits atomic.Int64
	// answered counts the write transactions answered, phaseNanos the
	// time they spent in each of store.WritePhases (commit.go).
	answered   atomic.Int64
	phaseNanos [len(store.WritePhases)]atomic.Int64
	// dur is the syncer's side of a commit (durable.go).
	dur *durability
	// unbooked is the rows written by requests of batches not yet
	// answered, which the meter adds only then: the allowance counts
	// them from the moment they are written (guard).
	unbooked atomic.Int64

	readers chan *conn
	// indexes is each table's secondary indexes as the meter sees them:
	// a row written costs one entry plus one per index entry it touches
	// (SPEC §14).
	indexes map[string][]index

	listen func(topic string)
}

var (
	_ store.Store  = (*DB)(nil)
	_ meter.Ledger = (*DB)(nil)
)

// Open opens (creating if needed) the database at path and brings its
// schema up to date. An up-to-date store is opened without writing.
func Open(ctx context.Context, path string, m *meter.Meter) (*DB, error) {
	db, err := open(ctx, path, m)
	// A store that cannot be opened for a full disk is storage that cannot
	// serve for now, as a statement's would be.
	return db, unavailable(err)
}

func open(ctx context.Context, path string, m *meter.Meter) (*DB, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		// Not even an empty file is created while writes are refused.
		if err := m.WriteRefusal(); err != nil {
			return nil, err
		}
	}
	db := &DB{meter: m, readers: make(chan *conn, readers), writes: make(chan *writeReq, maxBatch),
		stop: make(chan struct{}), stopped: make(chan struct{})}
	var err error
	db.writer, err = openConn(path, false)
	if err != nil {
		return nil, err
	}
	db.writer.guard = db.guard
	if err := db.migrate(ctx); err != nil {
		db.writer.close()
		return nil, err
	}
	for range readers {
		c, err := openConn(path, true)
		if err != nil {
			db.Close()
			return nil, err
		}
		c.guard = db.guard
		db.readers <- c
		db.opened++
	}
	if db.indexes, err = readIndexes(db.writer.c); err != nil {
		db.Close()
		return nil, err
	}
	db.writer.indexes = db.indexes
	db.writer.c.PreUpdateHook(db.writer.countWrite)
	// From here the syncer fsyncs the WAL for the committer (durable.go);
	// the migrations above committed under FULL.
	if err := db.writer.c.Exec("PRAGMA synchronous = NORMAL"); err != nil {
		db.Close()
		return nil, fmt.Errorf("configure %s: %w", path, err)
	}
	if db.dur, err = newDurability(path + "-wal"); err != nil {
		db.Close()
		return nil, err
	}
	// SQLite deletes the WAL at a clean close and makes a new one at open,
	// and under NORMAL it syncs the directory only at a checkpoint: the
	// syncer's fdatasync makes the WAL's bytes durable, this its name.
	if err := fsync.Dir(filepath.Dir(path)); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db.started = true
	go db.dur.syncLoop()
	go db.commitLoop()
	return db, nil
}

// Close closes every connection. The batch being committed finishes first;
// writes still queued are answered with an error.
func (db *DB) Close() error {
	var err error
	db.once.Do(func() { err = db.shutdown() })
	return err
}

func (db *DB) shutdown() error {
	db.closing.Lock()
	db.closed = true
	db.closing.Unlock()
	close(db.stop)
	if db.started {
		<-db.stopped
	}
	err := db.writer.close()
	// Readers in use are waited for: their transactions finish first.
	for range db.opened {
		err = errors.Join(err, (<-db.readers).close())
	}
	close(db.readers)
	if db.dur != nil {
		err = errors.Join(err, db.dur.wal.Close())
	}
	return err
}

// Listen sets the receiver of notified topics. With one process there is
// one node: a committed transaction's topics go straight to it.
func (db *DB) Listen(fn func(topic string)) { db.listen = fn }

// Update runs fn in a write transaction — its own, or a savepoint of a
// batch committed together with the writes queued beside it — again if fn
// asks for a retry (store.ErrRetry), and delivers the transaction's topics
// once it committed. A panic in fn rolls back its writes and is raised
// again here.
func (db *DB) Update(ctx context.Context, fn func(store.Tx) error) error {
	var res writeResult
	err := store.Retry(ctx, func() error {
		res = db.submit(&writeReq{ctx: ctx, fn: fn})
		if res.panicked != nil {
			panic(res.panicked)
		}
		return res.err
	})
	if err == nil && db.listen != nil {
		for _, t := range res.topics {
			db.listen(t)
		}
	}
	return unavailable(err)
}

// View runs fn in a read transaction on a pooled query-only connection.
func (db *DB) View(ctx context.Context, fn func(store.Tx) error) error {
	var c *conn
	select {
	case c = <-db.readers:
	case <-ctx.Done():
		return ctx.Err()
	}
	if c == nil {
		return errStoreClosed
	}
	defer func() { db.readers <- c }()
	c.reset()
	err := c.transact("BEGIN", func() error { return fn(&tx{c: c}) })
	db.meter.Add(ctx, 0, c.rowsRead)
	// What the snapshot held is answered only once it is durable — an
	// error too, which may say what the snapshot held (not found, someone
	// else's lease).
	if e := db.dur.await(ctx); e != nil {
		err = e
	}
	return unavailable(err)
}

var errStoreClosed = errors.New("sqlite: store closed")

func (db *DB) migrate(ctx context.Context) error {
	c := db.writer
	var version int
	if err := c.query(ctx, "PRAGMA user_version", nil, func(s *sqlite3.Stmt) error {
		version = s.ColumnInt(0)
		return nil
	}); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	reads := c.rowsRead
	defer func() { db.meter.Add(ctx, 0, reads) }()

	files, err := sqlschema.Migrations(migrationFS)
	if err != nil {
		return err
	}
	pending, newer := sqlschema.Pending(files, version)
	if newer {
		// A newer binary's schema: this one does not know what it holds.
		return fmt.Errorf("store schema version %d is newer than this build's %d: run the newer tessera (downgrades are not supported)", version, len(files))
	}
	if len(pending) == 0 {
		return nil
	}
	if err := db.meter.WriteRefusal(); err != nil {
		return err
	}
	// The missing migrations run in one transaction, so a crash leaves the
	// store at its old version, never half-migrated.
	return c.transact("BEGIN IMMEDIATE", func() error {
		for i, name := range pending {
			sql, err := migrationFS.ReadFile(name)
			if err != nil {
				return err
			}
			if err := c.c.Exec(string(sql)); err != nil {
				return fmt.Errorf("migration %s: %w", name, err)
			}
			if err := c.c.Exec("PRAGMA user_version = " + strconv.Itoa(version+i+1)); err != nil {
				return err
			}
		}
		return nil
	})
}

// index is a secondary index as the meter sees it: the table columns it
// holds (key columns and, for a partial index, the column its predicate
// tests), and for a partial index "WHERE c IS NOT NULL" that column — a
// row whose c is NULL has no entry in it. An index with any other
// predicate is counted as if every row had an entry: an upper bound.
type index struct {
	cols    []int
	notNull int // column of a "WHERE c IS NOT NULL" index; -1 for none
}

var notNullRE = regexp.MustCompile(`(?is)\bWHERE\s+"?(\w+)"?\s+IS\s+NOT\s+NULL\s*;?\s*$`)

// readIndexes learns every table's secondary indexes from the schema
// itself. It reads the schema, not the tables, and is not metered: it is
// the store's bookkeeping, not a request's. Every table is WITHOUT ROWID,
// so no table has a hidden rowid index to count.
func readIndexes(c *sqlite3.Conn) (map[string][]index, error) {
	type def struct{ name, table, sql string }
	var defs []def
	if err := rawQuery(c, `SELECT name, tbl_name, sql FROM sqlite_schema WHERE type = 'index' AND sql IS NOT NULL`, func(s *sqlite3.Stmt) {
		defs = append(defs, def{s.ColumnText(0), s.ColumnText(1), s.ColumnText(2)})
	}); err != nil {
		return nil, err
	}
	out := map[string][]index{}
	for _, d := range defs {
		ix := index{notNull: -1}
		if err := rawQuery(c, `SELECT cid FROM pragma_index_info(?)`, func(s *sqlite3.Stmt) {
			ix.cols = append(ix.cols, s.ColumnInt(0))
		}, d.name); err != nil {
			return nil, err
		}
		if m := notNullRE.FindStringSubmatch(d.sql); m != nil {
			if err := rawQuery(c, `SELECT cid FROM pragma_table_info(?) WHERE name = ?`, func(s *sqlite3.Stmt) {
				ix.notNull = s.ColumnInt(0)
			}, d.table, m[1]); err != nil {
				return nil, err
			}
			if ix.notNull >= 0 && !slices.Contains(ix.cols, ix.notNull) {
				ix.cols = append(ix.cols, ix.notNull)
			}
		}
		out[strings.ToLower(d.table)] = append(out[strings.ToLower(d.table)], ix)
	}
	return out, nil
}

// rawQuery runs one statement outside the meter and the guard.
func rawQuery(c *sqlite3.Conn, sql string, each func(*sqlite3.Stmt), args ...any) error {
	s, _, err := c.Prepare(sql)
	if err != nil {
		return fmt.Errorf("prepare %q: %w", firstLine(sql), err)
	}
	defer s.Close()
	if err := bind(s, args); err != nil {
		return err
	}
	for s.Step() {
		each(s)
	}
	return s.Err()
}

// conn is one SQLite connection with its prepared statements and the rows
// it has counted in the current transaction.
type conn struct {
	c     *sqlite3.Conn
	stmts map[string]*sqlite3.Stmt

	indexes     map[string][]index
	rowsRead    int64
	rowsWritten int64

	// guard refuses statements a spent allowance does not permit.
	guard func(readOnly bool) error
	// readOnlyMode mirrors PRAGMA query_only on this connection.
	readOnlyMode bool
	// inTx: the committer holds a batch's transaction open on this
	// connection, so a statement must never run outside it.
	inTx bool
}

// errTxLost refuses a statement of the writer once SQLite has rolled back
// the batch's whole transaction (commit.go): run anyway, it would commit
// on its own, unsynced and outside any batch.
var errTxLost = store.Unavailable("storage is unavailable (a failed write rolled back the transaction this one ran in); the operation was not completed",
	time.Second, nil)

// guard is the allowance check of every statement (SPEC §13): once the
// written allowance is spent, any statement that could write is refused,
// even one that would change nothing (CREATE ... IF NOT EXISTS, INSERT OR
// IGNORE of an existing row); once the read allowance is spent, all are.
func (db *DB) guard(readOnly bool) error {
	return db.meter.StatementRefusal(!readOnly, db.unbooked.Load())
}

// queryOnly sets PRAGMA query_only to match refusing, as a second line
// behind the statement check: SQLite itself then refuses writes too.
func (c *conn) queryOnly(refusing bool) error {
	if refusing == c.readOnlyMode {
		return nil
	}
	pragma := "PRAGMA query_only = 0"
	if refusing {
		pragma = "PRAGMA query_only = 1"
	}
	if err := c.c.Exec(pragma); err != nil {
		return err
	}
	c.readOnlyMode = refusing
	return nil
}

func openConn(path string, readOnly bool) (*conn, error) {
	c, err := sqlite3.OpenFlags(path, sqlite3.OPEN_READWRITE|sqlite3.OPEN_CREATE)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	// WAL keeps readers off the writer's back; synchronous=FULL fsyncs the
	// WAL at every commit, so an acknowledged write survives even power loss,
	// not only kill -9 (once the committer runs, the syncer takes over the
	// fsync: durable.go). Every queued write of a group commit runs in a
	// savepoint, whose statement journal would otherwise be a temporary
	// file created, written and deleted at each commit; in memory it costs
	// the pages the batch changes, and a crash needs none of it.
	pragmas := "PRAGMA busy_timeout = 5000; PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA temp_store = MEMORY;"
	if readOnly {
		pragmas = "PRAGMA busy_timeout = 5000; PRAGMA query_only = 1;"
	}
	if err := c.Exec(pragmas); err != nil {
		c.Close()
		return nil, fmt.Errorf("configure %s: %w", path, err)
	}
	return &conn{c: c, stmts: map[string]*sqlite3.Stmt{}, readOnlyMode: readOnly}, nil
}

func (c *conn) close() error {
	for _, s := range c.stmts {
		s.Close()
	}
	return c.c.Close()
}

func (c *conn) reset() {
	c.rowsRead, c.rowsWritten = 0, 0
}

// countWrite is the preupdate hook: unlike the update hook it also sees
// WITHOUT ROWID tables, rows written by triggers and the implicit delete
// of a REPLACE. A row costs one, plus one per index entry it inserts,
// deletes or moves: an update that changes none of an index's columns
// leaves that index alone, as SQLite itself does.
func (c *conn) countWrite(d sqlite3.PreUpdateData) {
	n := int64(1)
	for _, ix := range c.indexes[strings.ToLower(d.Table)] {
		if ix.touched(&d) {
			n++
		}
	}
	c.rowsWritten += n
}

func (ix *index) touched(d *sqlite3.PreUpdateData) bool {
	present := func(get func(int) (sqlite3.Value, error)) bool {
		if ix.notNull < 0 {
			return true
		}
		v, err := get(ix.notNull)
		return err != nil || v.Type() != sqlite3.NULL
	}
	switch d.Op {
	case sqlite3.AUTH_INSERT:
		return present(d.New)
	case sqlite3.AUTH_DELETE:
		return present(d.Old)
	}
	if !present(d.Old) && !present(d.New) {
		return false
	}
	for _, col := range ix.cols {
		o, err1 := d.Old(col)
		n, err2 := d.New(col)
		if err1 != nil || err2 != nil || !sameValue(o, n) {
			return true
		}
	}
	return false
}

func sameValue(a, b sqlite3.Value) bool {
	if a.Type() != b.Type() {
		return false
	}
	switch a.Type() {
	case sqlite3.NULL:
		return true
	case sqlite3.INTEGER:
		return a.Int64() == b.Int64()
	case sqlite3.FLOAT:
		return a.Float() == b.Float()
	case sqlite3.TEXT:
		return string(a.RawText()) == string(b.RawText())
	}
	return string(a.RawBlob()) == string(b.RawBlob())
}

// transact runs fn between begin and COMMIT, rolling back on error or panic.
// Rows counted by the hook for a rolled-back transaction are discarded by
// the caller. A canceled request stops at its next statement (query checks
// its ctx); one already running is not interrupted.
func (c *conn) transact(begin string, fn func() error) (err error) {
	if err := c.control(begin); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = c.control("ROLLBACK")
		}
	}()
	if err := fn(); err != nil {
		return err
	}
	if err := c.control("COMMIT"); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	committed = true
	return nil
}

// control runs a transaction's BEGIN, COMMIT, SAVEPOINT and the like,
// prepared once per connection rather than parsed at every use: the
// committer runs several for each request. The meter and the guard judge
// what a transaction does, not where it starts and ends, so these pass
// neither.
func (c *conn) control(sql string) error {
	s, err := c.prepare(sql)
	if err != nil {
		return err
	}
	if traceSQL != nil {
		traceSQL(c, sql, nil, true)
	}
	return s.Exec()
}

func (c *conn) prepare(sql string) (*sqlite3.Stmt, error) {
	if s, ok := c.stmts[sql]; ok {
		return s, nil
	}
	s, tail, err := c.c.Prepare(sql)
	if err != nil {
		return nil, fmt.Errorf("prepare %q: %w", firstLine(sql), err)
	}
	if strings.TrimSpace(tail) != "" {
		s.Close()
		return nil, fmt.Errorf("prepare %q: more than one statement", firstLine(sql))
	}
	c.stmts[sql] = s
	return s, nil
}

// traceSQL, when a test sets it, sees every statement run: on which
// connection, with what arguments, and whether it is a transaction's
// control (BEGIN, SAVEPOINT, COMMIT...) rather than a query.
var traceSQL func(c *conn, sql string, args []any, control bool)

// walkStep is the statement counter SQLite bumps at each step of a walk
// that a constraint bounds, through an index or a primary key. The
// engine counts every OP_Next and OP_Prev in aCounter[p5], where p5 is
// STMTSTATUS_FULLSCAN_STEP for a scan no constraint bounds and 0 for any
// other, and sqlite3_stmt_status reads any slot of aCounter; slot 0 has no
// name because SQLite never meant to report it. Without it the meter
// missed the rows of an index walk — the lapse check once walked a
// namespace's whole history as one row read. TestMeterCountsIndexWalks
// pins it, should a build of SQLite change what the slot holds.
const walkStep = sqlite3.StmtStatus(0)

// query runs one statement, calling each for every row it returns. Its
// rows read are the rows it returns or, when more, the steps its scans
// and index walks take: what it visits, whatever plan it runs with.
func (c *conn) query(ctx context.Context, sql string, args []any, each func(*sqlite3.Stmt) error) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	s, err := c.prepare(sql)
	if err != nil {
		return err
	}
	if traceSQL != nil {
		traceSQL(c, sql, args, false)
	}
	if c.guard != nil {
		if err := c.guard(s.ReadOnly()); err != nil {
			return err
		}
	}
	if c.inTx && c.c.GetAutocommit() {
		return errTxLost
	}
	returned := int64(0)
	defer func() {
		steps := int64(s.Status(sqlite3.STMTSTATUS_FULLSCAN_STEP, true) + s.Status(walkStep, true))
		c.rowsRead += max(returned, steps)
		err = errors.Join(err, s.Reset())
	}()
	if err := bind(s, args); err != nil {
		return fmt.Errorf("bind %q: %w", firstLine(sql), err)
	}
	for s.Step() {
		returned++
		if each != nil {
			if err := each(s); err != nil {
				return err
			}
		}
	}
	if err := s.Err(); err != nil {
		return translate(err)
	}
	return nil
}

// exec runs one statement and returns how many rows it changed.
func (c *conn) exec(ctx context.Context, sql string, args ...any) (int64, error) {
	if err := c.query(ctx, sql, args, nil); err != nil {
		return 0, err
	}
	return c.c.Changes(), nil
}

// translate maps SQLite errors the domain cares about onto store errors.
func translate(err error) error {
	if errors.Is(err, sqlite3.CONSTRAINT_PRIMARYKEY) || errors.Is(err, sqlite3.CONSTRAINT_UNIQUE) {
		return fmt.Errorf("%w: %w", store.ErrConflict, err)
	}
	return unavailable(err)
}

// unavailable maps the engine's errors that say storage cannot serve for
// now — the disk is full, the file cannot be read or written, the database
// stays locked past the busy timeout — to store.Unavailable with a retry
// hint, keeping the engine's error behind it for the logs. Any other error
// comes back as it was: a 500 is for bugs. SQLite reports a full disk at
// COMMIT as often as at a statement, so Update, View and Open apply this
// to whole transactions as well as each statement.
func unavailable(err error) error {
	if err == nil || store.IsUnavailable(err) {
		return err
	}
	var why string
	wait := 30 * time.Second
	switch {
	case errors.Is(err, sqlite3.FULL):
		why = "the disk is full"
	case errors.Is(err, sqlite3.IOERR), errors.Is(err, sqlite3.CANTOPEN), errors.Is(err, sqlite3.READONLY):
		why = "its files cannot be written or read: a full disk or an I/O error"
	case errors.Is(err, sqlite3.BUSY), errors.Is(err, sqlite3.LOCKED):
		why, wait = "the database is locked", time.Second
	default:
		return err
	}
	return store.Unavailable("storage is unavailable ("+why+"); the operation was not completed", wait, err)
}

// The statement helpers both backends share (package sqlschema).
var (
	firstLine  = sqlschema.FirstLine
	mustChange = sqlschema.MustChange
	nullable   = sqlschema.Nullable
)
