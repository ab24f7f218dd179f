package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tessera-dev/tessera/internal/store"
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

// nullable stores "" as NULL, so optional ids read back as "".
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// page runs a listing under store.PageBudget: scan takes each row and
// returns its value bytes; once they fill the budget, one row more is
// taken and the listing stops, so the caller can tell another page
// follows without the listing holding a full page's values twice over.
func (t *tx) page(ctx context.Context, sql string, args []any, scan func(pgx.Rows) (int, error)) error {
	var budget store.PageBudget
	full := false
	err := t.query(ctx, sql, args, func(r pgx.Rows) error {
		wasFull := full
		n, err := scan(r)
		full = budget.Take(n)
		if err == nil && wasFull {
			err = errPageFull
		}
		return err
	})
	if errors.Is(err, errPageFull) {
		return nil
	}
	return err
}

var errPageFull = errors.New("page full")
