package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/tessera-dev/tessera/internal/store/sqlschema"
)

// Times are stored as Unix milliseconds: compact, indexable, and the
// precision the API speaks.

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMS(v int64) time.Time { return time.UnixMilli(v).UTC() }

func bind(s *sqlite3.Stmt, args []any) error {
	for i, a := range args {
		p := i + 1
		var err error
		switch v := a.(type) {
		case nil:
			err = s.BindNull(p)
		case string:
			err = s.BindText(p, v)
		case int:
			err = s.BindInt64(p, int64(v))
		case int64:
			err = s.BindInt64(p, v)
		case float64:
			err = s.BindFloat(p, v)
		case bool:
			err = s.BindBool(p, v)
		case []byte:
			if v == nil {
				err = s.BindNull(p)
			} else {
				err = s.BindBlob(p, v)
			}
		case json.RawMessage:
			if v == nil {
				err = s.BindNull(p)
			} else {
				err = s.BindText(p, string(v))
			}
		case time.Time:
			err = s.BindInt64(p, ms(v))
		case *time.Time:
			if v == nil {
				err = s.BindNull(p)
			} else {
				err = s.BindInt64(p, ms(*v))
			}
		default:
			return fmt.Errorf("argument %d: unsupported type %T", p, a)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func colTime(s *sqlite3.Stmt, i int) time.Time { return fromMS(s.ColumnInt64(i)) }

func colTimePtr(s *sqlite3.Stmt, i int) *time.Time {
	if s.ColumnType(i) == sqlite3.NULL {
		return nil
	}
	t := fromMS(s.ColumnInt64(i))
	return &t
}

func colRaw(s *sqlite3.Stmt, i int) json.RawMessage {
	if s.ColumnType(i) == sqlite3.NULL {
		return nil
	}
	return json.RawMessage(s.ColumnText(i))
}

func colBlob(s *sqlite3.Stmt, i int) []byte {
	if s.ColumnType(i) == sqlite3.NULL {
		return nil
	}
	return s.ColumnBlob(i, nil)
}

// page runs a listing under store.PageBudget (sqlschema.Page): scan takes
// each row and returns its value bytes.
func (t *tx) page(ctx context.Context, sql string, args []any, scan func(*sqlite3.Stmt) (int, error)) error {
	var row *sqlite3.Stmt
	return sqlschema.Page(func(each func() error) error {
		return t.c.query(ctx, sql, args, func(s *sqlite3.Stmt) error {
			row = s
			return each()
		})
	}, func() (int, error) { return scan(row) })
}
