package postgres

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tessera-dev/tessera/internal/store/sqlschema"
)

// Times are stored as Unix milliseconds, as in SQLite: the precision the
// API speaks, compared and ordered as plain integers.

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMS(v int64) time.Time { return time.UnixMilli(v).UTC() }

// msPtr is an optional time as a statement argument: nil is NULL.
func msPtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMilli()
}

// timePtr is an optional time read back.
func timePtr(v *int64) *time.Time {
	if v == nil {
		return nil
	}
	t := fromMS(*v)
	return &t
}

// rawArg is a JSON value as a statement argument, stored as text byte for
// byte; nil is NULL.
func rawArg(v json.RawMessage) any {
	if v == nil {
		return nil
	}
	return string(v)
}

// raw is a JSON value read back: NULL is nil, never "null" or "".
func raw(v *string) json.RawMessage {
	if v == nil {
		return nil
	}
	return json.RawMessage(*v)
}

// bound is a statement's arguments as this backend binds them (arg), for
// a statement written once for both backends with Go values (package
// sqlschema).
func bound(args []any) []any {
	for i, a := range args {
		args[i] = arg(a)
	}
	return args
}

// page runs a listing under store.PageBudget (sqlschema.Page): scan takes
// each row and returns its value bytes.
func (t *tx) page(ctx context.Context, sql string, args []any, scan func(pgx.Rows) (int, error)) error {
	var row pgx.Rows
	return sqlschema.Page(func(each func() error) error {
		return t.query(ctx, sql, args, func(r pgx.Rows) error {
			row = r
			return each()
		})
	}, func() (int, error) { return scan(row) })
}
