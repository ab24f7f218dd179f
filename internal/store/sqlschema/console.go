package sqlschema

import (
	"strings"
	"time"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// StreamCols are the columns StreamQuery selects, in order: the event's
// id, time, action, target, run id, task id, queue, state, public flag,
// principal, and the title of its task.
const StreamCols = `e.id, e.time, e.action, e.target, coalesce(e.run_id, ''), coalesce(e.task_id, ''), coalesce(e.queue, ''),
 coalesce(e.state, ''), e.public, e.principal_id, coalesce(tk.title, '')`

// StreamQuery is the read of f's audit events, oldest first, with ?
// placeholders, selecting StreamCols. It walks the namespace's primary key
// (the public event index for a public read) upwards from f.After: a read
// costs the events after the cursor, not the namespace's history.
func StreamQuery(f store.StreamFilter) (string, []any) {
	from, on := `audit_events e`, ``
	var args []any
	where := ` WHERE e.namespace = ? AND e.id > ?`
	switch {
	case f.Public:
		from = `public_events p JOIN audit_events e ON e.namespace = p.namespace AND e.id = p.id`
		where = ` WHERE p.namespace = ? AND p.id > ?`
		on = ` AND tk.public`
		args = append(args, f.Namespace, f.After)
	case f.Scan > 0:
		// The newest Scan events only, read newest first by the key and
		// put back in order below.
		from = `(SELECT * FROM audit_events WHERE namespace = ? AND id > ? ORDER BY id DESC LIMIT ?) e`
		where = ` WHERE true`
		args = append(args, f.Namespace, f.After, f.Scan)
	default:
		args = append(args, f.Namespace, f.After)
	}
	if len(f.Actions) > 0 {
		where += ` AND e.action IN (?` + strings.Repeat(`, ?`, len(f.Actions)-1) + `)`
		for _, a := range f.Actions {
			args = append(args, a)
		}
	}
	if f.Queue != "" {
		where += ` AND e.queue = ?`
		args = append(args, f.Queue)
	}
	if f.TaskID != "" {
		where += ` AND e.task_id = ?`
		args = append(args, f.TaskID)
	}
	sql := `SELECT ` + StreamCols + ` FROM ` + from +
		` LEFT JOIN tasks tk ON tk.namespace = e.namespace AND tk.id = e.task_id` + on + where + ` ORDER BY e.id LIMIT ?`
	return sql, append(args, f.Limit)
}

// ThroughputQuery counts events per minute, queue and state among a
// namespace's newest scan audit events made at or after since, with ?
// placeholders, selecting minute (Unix minutes), queue, state and count.
func ThroughputQuery(ns string, since time.Time, actions []string, scan int) (string, []any) {
	args := []any{ns, tessera.IDFloor(since), scan}
	in := `?` + strings.Repeat(`, ?`, len(actions)-1)
	for _, a := range actions {
		args = append(args, a)
	}
	return `SELECT e.time / 60000, coalesce(e.queue, ''), coalesce(e.state, ''), count(*)
 FROM (SELECT time, action, queue, state FROM audit_events WHERE namespace = ? AND id >= ? ORDER BY id DESC LIMIT ?) e
 WHERE e.action IN (` + in + `) GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`, args
}

// SearchDialect is what the backends spell their own way in a task search.
type SearchDialect struct {
	// Label is the condition that labels hold the argument; Title that the
	// title, its ASCII letters lowered, contains the argument.
	Label, Title string
}

// TaskSearchQuery is the read of f's tasks of ns, newest first, with ?
// placeholders, selecting cols.
func TaskSearchQuery(ns string, f store.TaskSearch, cols string, d SearchDialect) (string, []any) {
	sql := `SELECT ` + cols + ` FROM tasks WHERE namespace = ?`
	args := []any{ns}
	and := func(cond string, v ...any) {
		sql += ` AND ` + cond
		args = append(args, v...)
	}
	if n := len(f.States); n > 0 {
		in := make([]any, n)
		for i, st := range f.States {
			in[i] = st
		}
		and(`state IN (?`+strings.Repeat(`, ?`, n-1)+`)`, in...)
	}
	if !f.RunAtUpTo.IsZero() {
		and(`run_at <= ?`, f.RunAtUpTo.UnixMilli())
	}
	if !f.RunAtAfter.IsZero() {
		and(`run_at > ?`, f.RunAtAfter.UnixMilli())
	}
	if f.Queue != "" {
		and(`queue = ?`, f.Queue)
	}
	if f.Label != "" {
		and(d.Label, f.Label)
	}
	if f.Title != "" {
		and(d.Title, ASCIILower(f.Title))
	}
	if f.After != "" {
		and(`id > ?`, f.After)
	}
	if f.Before != "" {
		and(`id < ?`, f.Before)
	}
	return sql + ` ORDER BY id DESC LIMIT ?`, append(args, f.Limit)
}

// ASCIILower lowers s's ASCII letters only, as both backends' title match
// does: SQLite's lower() knows no others, and PostgreSQL's is held to the
// same by the "C" collation.
func ASCIILower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
