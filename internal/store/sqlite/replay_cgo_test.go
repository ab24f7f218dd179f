//go:build cgosqlite

package sqlite

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	mattn "github.com/mattn/go-sqlite3"
)

// The cgo driver in the replay comparison (replay_test.go): SQLite's C
// amalgamation, the same release as the ncruces build, through
// mattn/go-sqlite3's driver-level API — prepared statements kept, no
// database/sql pool in the way, no context watcher (a background context).
func init() {
	replayers["mattn-cgo"] = openCgoReplayer
}

type cgoReplayer struct {
	c     *mattn.SQLiteConn
	stmts map[string]driver.Stmt
	cols  map[string][]driver.Value
}

func openCgoReplayer(path string) (replayer, error) {
	dc, err := (&mattn.SQLiteDriver{}).Open(path)
	if err != nil {
		return nil, err
	}
	c := dc.(*mattn.SQLiteConn)
	if _, err := c.Exec(replayPragmas, nil); err != nil {
		c.Close()
		return nil, err
	}
	return &cgoReplayer{c: c, stmts: map[string]driver.Stmt{}, cols: map[string][]driver.Value{}}, nil
}

func (r *cgoReplayer) run(st statement) error {
	s, ok := r.stmts[st.sql]
	if !ok {
		var err error
		if s, err = r.c.Prepare(st.sql); err != nil {
			return err
		}
		r.stmts[st.sql] = s
	}
	args := make([]driver.NamedValue, len(st.args))
	for i, a := range st.args {
		v, err := cgoValue(a)
		if err != nil {
			return fmt.Errorf("argument %d: %w", i+1, err)
		}
		args[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	ctx := context.Background()
	if st.control {
		_, err := s.(driver.StmtExecContext).ExecContext(ctx, args)
		return err
	}
	rows, err := s.(driver.StmtQueryContext).QueryContext(ctx, args)
	if err != nil {
		return err
	}
	dest, ok := r.cols[st.sql]
	if !ok {
		dest = make([]driver.Value, len(rows.Columns()))
		r.cols[st.sql] = dest
	}
	for {
		if err := rows.Next(dest); err != nil {
			if errors.Is(err, io.EOF) {
				return rows.Close()
			}
			return errors.Join(err, rows.Close())
		}
	}
}

// cgoValue is an argument as the store binds it (values.go's bind): times
// as Unix milliseconds, JSON as text.
func cgoValue(a any) (driver.Value, error) {
	switch v := a.(type) {
	case nil, string, int64, float64, bool:
		return v, nil
	case int:
		return int64(v), nil
	case []byte:
		if v == nil {
			return nil, nil
		}
		return v, nil
	case json.RawMessage:
		if v == nil {
			return nil, nil
		}
		return string(v), nil
	case time.Time:
		return ms(v), nil
	case *time.Time:
		if v == nil {
			return nil, nil
		}
		return ms(*v), nil
	}
	return nil, fmt.Errorf("unsupported type %T", a)
}

func (r *cgoReplayer) close() error {
	for _, s := range r.stmts {
		s.Close()
	}
	return r.c.Close()
}
