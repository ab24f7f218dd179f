package sqlschema

import (
	"errors"
	"io/fs"
	"slices"
	"strings"

	"github.com/tessera-dev/tessera/internal/store"
)

// FirstLine is a statement's first line, for an error message.
func FirstLine(sql string) string {
	sql = strings.TrimSpace(sql)
	if i := strings.IndexByte(sql, '\n'); i >= 0 {
		return sql[:i] + " …"
	}
	return sql
}

// MustChange turns a write of no row into store.ErrNotFound.
func MustChange(n int64, err error) error {
	if err == nil && n == 0 {
		return store.ErrNotFound
	}
	return err
}

// Nullable is "" as NULL, so optional ids read back as "".
func Nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// Page runs a listing under store.PageBudget: query runs its statement,
// calling each for every row; scan takes the current row and returns its
// value bytes. Once they fill the budget, one row more is taken and the
// listing stops, so the caller can tell another page follows without the
// listing holding a full page's values twice over.
func Page(query func(each func() error) error, scan func() (int, error)) error {
	var budget store.PageBudget
	full := false
	err := query(func() error {
		wasFull := full
		n, err := scan()
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

// Migrations lists a backend's migration files, migrations/*.sql of fsys,
// in order: the n-th takes a schema from version n-1 to n.
func Migrations(fsys fs.FS) ([]string, error) {
	files, err := fs.Glob(fsys, "migrations/*.sql")
	slices.Sort(files)
	return files, err
}

// Pending is what a schema at version lacks of files, in order; newer says
// the schema is past every file, a newer binary's.
func Pending(files []string, version int) (pending []string, newer bool) {
	if version > len(files) {
		return nil, true
	}
	return files[version:], false
}
