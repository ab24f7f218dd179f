// Package sqlite is the embedded store: one SQLite file in WAL mode, used
// through the ncruces driver's direct API so every statement passes one
// place that meters rows (preupdate hook, rows stepped, full-scan steps).
//
// Writes go through a single connection, one transaction at a time (SQLite
// has one writer anyway; serializing in process avoids busy retries and makes
// claims trivially exclusive). Reads use a small pool of query-only
// connections that see WAL snapshots and never wait for the writer.
package sqlite

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/ncruces/go-sqlite3"

	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/store"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

const readers = 4

// DB is a Store over one SQLite file.
type DB struct {
	meter *meter.Meter

	wmu    sync.Mutex
	writer *conn
	closed bool

	readers chan *conn
	// indexes counts the indexes of each table: a row written to a table
	// costs one entry in it plus one per index (SPEC §14).
	indexes map[string]int64
}

var _ store.Store = (*DB)(nil)

// Open opens (creating if needed) the database at path and brings its
// schema up to date. An up-to-date store is opened without writing.
func Open(ctx context.Context, path string, m *meter.Meter) (*DB, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		// Not even an empty file is created while writes are refused.
		if err := m.WriteRefusal(); err != nil {
			return nil, err
		}
	}
	db := &DB{meter: m, readers: make(chan *conn, readers)}
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
	}
	if db.indexes, err = indexCounts(); err != nil {
		db.Close()
		return nil, err
	}
	db.writer.c.PreUpdateHook(db.writer.countWrite)
	return db, nil
}

// IndexCount is how many secondary indexes the meter counts for table: a
// row written there costs 1 + IndexCount rows.
func (db *DB) IndexCount(table string) int64 { return db.indexes[table] }

// Close closes every connection. In-flight transactions finish first.
func (db *DB) Close() error {
	db.wmu.Lock()
	defer db.wmu.Unlock()
	if db.closed {
		return nil
	}
	db.closed = true
	err := db.writer.close()
	for range readers {
		if c := <-db.readers; c != nil {
			err = errors.Join(err, c.close())
		}
	}
	return err
}

// Update runs fn in a write transaction (BEGIN IMMEDIATE).
func (db *DB) Update(ctx context.Context, fn func(store.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	db.wmu.Lock()
	defer db.wmu.Unlock()
	if db.closed {
		return errors.New("sqlite: store closed")
	}
	c := db.writer
	c.reset()
	refusing := db.meter.WriteRefusal() != nil
	if err := c.queryOnly(refusing); err != nil {
		return err
	}
	// Under query_only SQLite will not take the write lock, and nothing
	// may write anyway: a plain BEGIN lets the reads through.
	begin := "BEGIN IMMEDIATE"
	if refusing {
		begin = "BEGIN"
	}
	err := c.transact(begin, func() error { return fn(&tx{c: c}) })
	var written int64
	if err == nil {
		for table, n := range c.rowsByTable {
			written += n * (1 + db.indexes[table])
		}
	}
	db.meter.Add(ctx, written, c.rowsRead)
	return err
}

// View runs fn in a read transaction on a pooled query-only connection.
func (db *DB) View(ctx context.Context, fn func(store.Tx) error) error {
	var c *conn
	select {
	case c = <-db.readers:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { db.readers <- c }()
	if c == nil {
		return errors.New("sqlite: store closed")
	}
	c.reset()
	err := c.transact("BEGIN", func() error { return fn(&tx{c: c}) })
	db.meter.Add(ctx, 0, c.rowsRead)
	return err
}

func (db *DB) migrate(ctx context.Context) error {
	c := db.writer
	var version int
	if err := c.query("PRAGMA user_version", nil, func(s *sqlite3.Stmt) error {
		version = s.ColumnInt(0)
		return nil
	}); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	reads := c.rowsRead
	defer func() { db.meter.Add(ctx, 0, reads) }()

	files, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		return err
	}
	slices.Sort(files)
	if version >= len(files) {
		return nil
	}
	if err := db.meter.WriteRefusal(); err != nil {
		return err
	}
	// The missing migrations run in one transaction, so a crash leaves the
	// store at its old version, never half-migrated.
	return c.transact("BEGIN IMMEDIATE", func() error {
		for i, name := range files[version:] {
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

// indexRE finds the index statements of the migrations.
var indexRE = regexp.MustCompile(`(?is)\b(CREATE\s+(?:UNIQUE\s+)?INDEX\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)\s+ON\s+(\w+)|DROP\s+INDEX\s+(?:IF\s+EXISTS\s+)?(\w+))`)

// indexCounts derives how many secondary indexes each table has from the
// migrations themselves, so a cold start need not read the schema to meter
// (TestIndexCountsMatchSchema holds this to sqlite_schema). Every table is
// WITHOUT ROWID, so no table has a hidden rowid index to count.
func indexCounts() (map[string]int64, error) {
	files, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	slices.Sort(files)
	table := map[string]string{} // index → table
	for _, name := range files {
		sql, err := migrationFS.ReadFile(name)
		if err != nil {
			return nil, err
		}
		for _, m := range indexRE.FindAllStringSubmatch(string(sql), -1) {
			if m[2] != "" {
				table[strings.ToLower(m[2])] = strings.ToLower(m[3])
			} else {
				delete(table, strings.ToLower(m[4]))
			}
		}
	}
	counts := map[string]int64{}
	for _, t := range table {
		counts[t]++
	}
	return counts, nil
}

// conn is one SQLite connection with its prepared statements and the rows
// it has counted in the current transaction.
type conn struct {
	c     *sqlite3.Conn
	stmts map[string]*sqlite3.Stmt

	rowsRead    int64
	rowsByTable map[string]int64

	// guard refuses statements a spent allowance does not permit.
	guard func(readOnly bool) error
	// readOnlyMode mirrors PRAGMA query_only on this connection.
	readOnlyMode bool
}

// guard is the allowance check of every statement (SPEC §13): once the
// written allowance is spent, any statement that could write is refused,
// even one that would change nothing (CREATE ... IF NOT EXISTS, INSERT OR
// IGNORE of an existing row); once the read allowance is spent, all are.
func (db *DB) guard(readOnly bool) error {
	if err := db.meter.ReadRefusal(); err != nil {
		return err
	}
	if !readOnly {
		return db.meter.WriteRefusal()
	}
	return nil
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
	// not only kill -9.
	pragmas := "PRAGMA busy_timeout = 5000; PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;"
	if readOnly {
		pragmas = "PRAGMA busy_timeout = 5000; PRAGMA query_only = 1;"
	}
	if err := c.Exec(pragmas); err != nil {
		c.Close()
		return nil, fmt.Errorf("configure %s: %w", path, err)
	}
	return &conn{c: c, stmts: map[string]*sqlite3.Stmt{}, rowsByTable: map[string]int64{}, readOnlyMode: readOnly}, nil
}

func (c *conn) close() error {
	for _, s := range c.stmts {
		s.Close()
	}
	return c.c.Close()
}

func (c *conn) reset() {
	c.rowsRead = 0
	clear(c.rowsByTable)
}

// countWrite is the preupdate hook: unlike the update hook it also sees
// WITHOUT ROWID tables and the implicit delete of a REPLACE.
func (c *conn) countWrite(d sqlite3.PreUpdateData) {
	c.rowsByTable[d.Table]++
}

// transact runs fn between begin and COMMIT, rolling back on error or panic.
// Rows counted by the hook for a rolled-back transaction are discarded.
func (c *conn) transact(begin string, fn func() error) (err error) {
	if err := c.c.Exec(begin); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = c.c.Exec("ROLLBACK")
			clear(c.rowsByTable)
		}
	}()
	if err := fn(); err != nil {
		return err
	}
	if err := c.c.Exec("COMMIT"); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	committed = true
	return nil
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

// traceSQL, when a test sets it, sees every statement run.
var traceSQL func(sql string)

// query runs one statement, calling each for every row it returns. Rows
// returned and rows visited by full scans count as rows read.
func (c *conn) query(sql string, args []any, each func(*sqlite3.Stmt) error) (err error) {
	s, err := c.prepare(sql)
	if err != nil {
		return err
	}
	if traceSQL != nil {
		traceSQL(sql)
	}
	if c.guard != nil {
		if err := c.guard(s.ReadOnly()); err != nil {
			return err
		}
	}
	defer func() {
		c.rowsRead += int64(s.Status(sqlite3.STMTSTATUS_FULLSCAN_STEP, true))
		err = errors.Join(err, s.Reset())
		_ = s.ClearBindings()
	}()
	if err := bind(s, args); err != nil {
		return fmt.Errorf("bind %q: %w", firstLine(sql), err)
	}
	for s.Step() {
		c.rowsRead++
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
func (c *conn) exec(sql string, args ...any) (int64, error) {
	if err := c.query(sql, args, nil); err != nil {
		return 0, err
	}
	return c.c.Changes(), nil
}

// translate maps SQLite errors the domain cares about onto store errors.
func translate(err error) error {
	if errors.Is(err, sqlite3.CONSTRAINT_PRIMARYKEY) || errors.Is(err, sqlite3.CONSTRAINT_UNIQUE) {
		return fmt.Errorf("%w: %w", store.ErrConflict, err)
	}
	return err
}

func firstLine(sql string) string {
	sql = strings.TrimSpace(sql)
	if i := strings.IndexByte(sql, '\n'); i >= 0 {
		return sql[:i] + " …"
	}
	return sql
}
