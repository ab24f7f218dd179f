package sqlite

import (
	"context"
	"fmt"

	"github.com/ncruces/go-sqlite3"

	"github.com/tessera-dev/tessera/internal/meter"
)

// The meter's ledger (meter.Ledger) lives in meter_days. Its statements are
// the store's bookkeeping: they run on the writer outside any request's
// transaction, unmetered, and pass while the allowance refuses every other
// write — an allowance that could not be accounted for could never reset.

func (db *DB) LedgerAdd(ctx context.Context, day string, written, read int64) (meter.LedgerDay, error) {
	var out meter.LedgerDay
	err := db.bookkeeping(ctx, written != 0 || read != 0, func(c *sqlite3.Conn) error {
		sql := `SELECT rows_written, rows_read, allowance_written, allowance_read FROM meter_days WHERE day = ?`
		args := []any{day}
		if written != 0 || read != 0 {
			sql = `INSERT INTO meter_days (day, rows_written, rows_read) VALUES (?, ?, ?)
 ON CONFLICT DO UPDATE SET rows_written = rows_written + excluded.rows_written, rows_read = rows_read + excluded.rows_read
 RETURNING rows_written, rows_read, allowance_written, allowance_read`
			args = []any{day, written, read}
		}
		return rawQuery(c, sql, func(s *sqlite3.Stmt) {
			out.RowsWritten, out.RowsRead = s.ColumnInt64(0), s.ColumnInt64(1)
			if s.ColumnType(2) != sqlite3.NULL {
				out.Allowance = &meter.Allowance{RowsWrittenPerDay: s.ColumnInt64(2), RowsReadPerDay: s.ColumnInt64(3)}
			}
		}, args...)
	})
	return out, err
}

func (db *DB) LedgerSetAllowance(ctx context.Context, day string, a meter.Allowance) error {
	return db.bookkeeping(ctx, true, func(c *sqlite3.Conn) error {
		return rawQuery(c, `INSERT INTO meter_days (day, rows_written, rows_read, allowance_written, allowance_read) VALUES (?, 0, 0, ?, ?)
 ON CONFLICT DO UPDATE SET allowance_written = excluded.allowance_written, allowance_read = excluded.allowance_read`,
			func(*sqlite3.Stmt) {}, day, a.RowsWrittenPerDay, a.RowsReadPerDay)
	})
}

// bookkeeping runs fn on the writer, through the committer, in a
// transaction of its own.
func (db *DB) bookkeeping(ctx context.Context, write bool, fn func(*sqlite3.Conn) error) error {
	return db.submit(&writeReq{ctx: ctx, book: fn, bookWrite: write}).err
}

// runBookkeepingReq runs req on the committer and hands its answer to the
// syncer: once a write of it is durable, and in any case after every
// batch committed before it (what it read may be theirs).
func (db *DB) runBookkeepingReq(req *writeReq) {
	<-db.dur.free
	var seq int64
	err := db.dur.broken()
	if err == nil {
		if req.bookWrite {
			seq = db.dur.begun.Add(1)
		}
		err = db.runBookkeeping(req)
		if err == nil && req.bookWrite {
			db.commits.Add(1)
		}
	}
	db.dur.acks <- ack{seq: seq, answer: func(syncErr error) {
		if err == nil {
			err = syncErr
		}
		req.done <- writeResult{err: err}
	}}
}

// runBookkeeping is the committer's side of bookkeeping: query_only lifted
// for a write, and the hook's counts thrown away.
func (db *DB) runBookkeeping(req *writeReq) error {
	c := db.writer
	begin := "BEGIN"
	if req.bookWrite {
		if err := c.queryOnly(false); err != nil {
			return err
		}
		begin = "BEGIN IMMEDIATE"
	}
	defer c.reset()
	if err := c.transact(begin, func() error { return req.book(c.c) }); err != nil {
		return fmt.Errorf("meter ledger: %w", translate(err))
	}
	return nil
}
