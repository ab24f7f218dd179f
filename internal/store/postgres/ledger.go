package postgres

import (
	"context"
	"fmt"

	"github.com/tessera-dev/tessera/internal/meter"
)

// The meter's ledger (meter.Ledger) lives in meter_days, shared by every
// node. Its statements are the store's bookkeeping: each runs on its own,
// outside any request's transaction, unmetered, and in a read-write
// transaction while the allowance refuses every other write — an
// allowance that could not be accounted for could never reset. Nodes'
// additions to one day meet in an additive upsert: concurrent ones wait
// for each other's row lock, and none is lost.

func (db *DB) LedgerAdd(ctx context.Context, day string, written, read int64) (meter.LedgerDay, error) {
	sql := `SELECT rows_written, rows_read, allowance_written, allowance_read FROM meter_days WHERE day = $1`
	args := []any{day}
	if written != 0 || read != 0 {
		sql = `INSERT INTO meter_days (day, rows_written, rows_read) VALUES ($1, $2, $3)
 ON CONFLICT (day) DO UPDATE SET rows_written = meter_days.rows_written + excluded.rows_written,
   rows_read = meter_days.rows_read + excluded.rows_read
 RETURNING rows_written, rows_read, allowance_written, allowance_read`
		args = []any{day, written, read}
	}
	var out meter.LedgerDay
	rows, err := db.pool.Query(ctx, sql, args...)
	if err != nil {
		return out, translate(fmt.Errorf("meter ledger: %w", err), false, db.meter)
	}
	defer rows.Close()
	for rows.Next() {
		var aw, ar *int64
		if err := rows.Scan(&out.RowsWritten, &out.RowsRead, &aw, &ar); err != nil {
			return out, fmt.Errorf("meter ledger: %w", err)
		}
		if aw != nil {
			out.Allowance = &meter.Allowance{RowsWrittenPerDay: *aw}
			if ar != nil {
				out.Allowance.RowsReadPerDay = *ar
			}
		}
	}
	if err := rows.Err(); err != nil {
		return out, translate(fmt.Errorf("meter ledger: %w", err), false, db.meter)
	}
	return out, nil
}

func (db *DB) LedgerSetAllowance(ctx context.Context, day string, a meter.Allowance) error {
	_, err := db.pool.Exec(ctx, `INSERT INTO meter_days (day, rows_written, rows_read, allowance_written, allowance_read) VALUES ($1, 0, 0, $2, $3)
 ON CONFLICT (day) DO UPDATE SET allowance_written = excluded.allowance_written, allowance_read = excluded.allowance_read`,
		day, a.RowsWrittenPerDay, a.RowsReadPerDay)
	if err != nil {
		return translate(fmt.Errorf("meter ledger: %w", err), false, db.meter)
	}
	return nil
}
