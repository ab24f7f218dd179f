package sqlite

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/tessera-dev/tessera/internal/store"
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

// pageBudget stops a listing once its rows carry store.PageBytes of
// values, after one row more: the caller sees that another page follows
// without the listing holding every value of a full page in memory.
type pageBudget struct {
	bytes int
	full  bool
}

var errPageFull = errors.New("page full")

// take counts a row's value bytes; it answers errPageFull to stop stepping.
func (p *pageBudget) take(n int) error {
	if p.full {
		return errPageFull
	}
	p.bytes += n
	p.full = p.bytes >= store.PageBytes
	return nil
}

// done turns the stop into success.
func (p *pageBudget) done(err error) error {
	if errors.Is(err, errPageFull) {
		return nil
	}
	return err
}
