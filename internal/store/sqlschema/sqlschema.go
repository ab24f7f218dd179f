// Package sqlschema holds what both SQL backends (sqlite, postgres) share of
// Tessera's one logical schema, so a second backend is not a second copy of
// a rule: which columns a task change writes, the task statements over the
// one task index (tasks.go), the tables a namespace purge empties, how
// counts rows turn into counts by state, and the scope of an audit read. SQL here uses ? placeholders; a backend with numbered ones
// rewrites them (Numbered).
package sqlschema

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// Change is one column a task change writes, with its new Go value: a
// string, int, bool, time.Time, *time.Time, []byte or json.RawMessage (nil
// for NULL), for the backend to bind its way.
type Change struct {
	Column string
	Value  any
}

// TaskChanges lists the mutable columns whose value differs between before
// and after, with after's values: what TaskUpdate writes. Writing only
// those keeps a heartbeat off every index but the one holding the lease's
// expiry, and out of the count triggers, which fire on the columns named.
func TaskChanges(before, after *tessera.Task) []Change {
	var out []Change
	set := func(col string, v any) { out = append(out, Change{col, v}) }
	if before.State != after.State {
		set("state", after.State)
	}
	// A debounced enqueue gives its unclaimed task a new title, brief and
	// payload.
	if before.Title != after.Title {
		set("title", after.Title)
	}
	if before.Brief != after.Brief {
		set("brief", after.Brief)
	}
	if !bytes.Equal(before.Payload, after.Payload) {
		set("payload", after.Payload)
	}
	if before.Attempts != after.Attempts {
		set("attempts", after.Attempts)
	}
	if !before.RunAt.Equal(after.RunAt) {
		set("run_at", after.RunAt)
	}
	if !before.UpdatedAt.Equal(after.UpdatedAt) {
		set("updated_at", after.UpdatedAt)
	}
	if before.GateCount != after.GateCount {
		set("gates", after.GateCount)
	}
	if before.CancelRequested != after.CancelRequested {
		set("cancel_requested", after.CancelRequested)
	}
	if !bytes.Equal(before.Result, after.Result) {
		set("result", after.Result)
	}
	if before.Error != after.Error {
		set("error", after.Error)
	}
	if !bytes.Equal(before.Progress, after.Progress) {
		set("progress", after.Progress)
	}
	if !sameTimePtr(before.FinishedAt, after.FinishedAt) {
		set("finished_at", after.FinishedAt)
	}
	if !sameRun(before.Run, after.Run) {
		for i, v := range RunValues(after.Run) {
			set(runColumns[i], v)
		}
	}
	for i, name := range leaseColumns {
		if before.Lease == nil || after.Lease == nil {
			if (before.Lease == nil) != (after.Lease == nil) {
				set(name, LeaseValues(after.Lease)[i])
			}
			continue
		}
		if !sameLeaseField(i, before.Lease, after.Lease) {
			set(name, LeaseValues(after.Lease)[i])
		}
	}
	return out
}

// runColumns are RunCols one by one.
var runColumns = strings.Split(strings.ReplaceAll(RunCols, " ", ""), ",")

func sameRun(a, b *tessera.Run) bool {
	return a == nil && b == nil || a != nil && b != nil && a.ID == b.ID && a.Holder == b.Holder && a.Attempt == b.Attempt &&
		a.StartedAt.Equal(b.StartedAt) && sameTimePtr(a.EndedAt, b.EndedAt) && a.Outcome == b.Outcome && a.Error == b.Error
}

// leaseColumns are a lease's columns, in LeaseValues' order.
var leaseColumns = []string{"lease_run_id", "lease_holder", "lease_token_hash", "lease_expires_at", "lease_seconds"}

// LeaseValues are a lease's column values in the order of the tasks table
// (all nil for no lease).
func LeaseValues(l *tessera.Lease) []any {
	if l == nil {
		return []any{nil, nil, nil, nil, nil}
	}
	return []any{l.RunID, l.Holder, l.TokenHash, l.ExpiresAt, l.Seconds}
}

func sameTimePtr(a, b *time.Time) bool {
	return a == nil && b == nil || a != nil && b != nil && a.Equal(*b)
}

func sameLeaseField(i int, a, b *tessera.Lease) bool {
	switch i {
	case 0:
		return a.RunID == b.RunID
	case 1:
		return a.Holder == b.Holder
	case 2:
		return bytes.Equal(a.TokenHash, b.TokenHash)
	case 3:
		return a.ExpiresAt.Equal(b.ExpiresAt)
	}
	return a.Seconds == b.Seconds
}

// namespaceTables are the tables a namespace purge empties, children before
// parents, each with its primary key (every one leads with namespace).
var namespaceTables = []struct{ Table, Key string }{
	{"dep_work", "namespace, parent_id, kind"},
	{"task_edges", "namespace, parent_id, child_id"},
	{"task_dependencies", "namespace, task_id"},
	{"task_checkpoints", "namespace, task_id"},
	{"task_gates", "namespace, task_id, key"},
	{"task_events", "namespace, task_id, seq"},
	{"runs", "namespace, task_id, run_id"},
	{"task_unique", "namespace, queue, unique_key"},
	{"task_debounce", "namespace, queue, debounce_key"},
	{"tasks", "namespace, id"},
	{"task_counts", "namespace, queue, public, shard"},
	{"record_versions", "namespace, bucket, key, version"},
	{"buckets", "namespace, name"},
	{"blob_readers", "namespace, sha256, principal_id"},
	{"blobs", "namespace, sha256"},
	{"uploads", "namespace, id"},
	{"namespace_settings", "namespace"},
	{"idempotency", "namespace, principal_id, route, key"},
	{"queue_pauses", "namespace, queue"},
	{"task_lanes", "namespace, queue, grp, requires"},
	{"queue_fleet", "namespace, queue"},
	{"task_groups", "namespace, queue, grp"},
	{"queue_claimants", "namespace, queue, capabilities"},
}

// Exec runs one statement written with ? placeholders and says how many
// rows it changed.
type Exec func(ctx context.Context, sql string, args ...any) (int64, error)

// PurgeNamespace deletes at most limit rows of ns, children before
// parents, and says how many; once nothing is left it deletes the
// namespace itself and says 0.
func PurgeNamespace(ctx context.Context, exec Exec, ns string, limit int) (int, error) {
	deleted := 0
	for _, nt := range namespaceTables {
		if deleted >= limit {
			return deleted, nil
		}
		n, err := exec(ctx, `DELETE FROM `+nt.Table+` WHERE (`+nt.Key+`) IN (SELECT `+nt.Key+` FROM `+nt.Table+` WHERE namespace = ? LIMIT ?)`,
			ns, limit-deleted)
		if err != nil {
			return deleted, fmt.Errorf("purge %s of %s: %w", nt.Table, ns, err)
		}
		deleted += int(n)
	}
	if deleted > 0 {
		return deleted, nil
	}
	_, err := exec(ctx, `DELETE FROM namespaces WHERE name = ?`, ns)
	return 0, err
}

// SessionMintsPurge deletes session mints older than its first argument,
// at most its second, walking the distinct addresses of session_mints
// through its key, one seek each, like AuditNamespaces.
const SessionMintsPurge = `WITH RECURSIVE a(v) AS (
  SELECT (SELECT min(addr) FROM session_mints)
  UNION ALL
  SELECT (SELECT min(addr) FROM session_mints WHERE addr > v) FROM a WHERE v IS NOT NULL)
DELETE FROM session_mints WHERE (addr, minted_at, session) IN (
 SELECT addr, minted_at, session FROM session_mints
 WHERE addr IN (SELECT v FROM a WHERE v IS NOT NULL) AND minted_at < ? LIMIT ?)`

// auditNamespaces walks the distinct namespaces of an audit table through
// its primary key, one index seek per namespace (a loose index scan, which
// neither engine does by itself): reads across namespaces use it instead of
// scanning the table.
const auditNamespaces = `WITH RECURSIVE ns(n) AS (
  SELECT (SELECT min(namespace) FROM %[1]s)
  UNION ALL
  SELECT (SELECT min(namespace) FROM %[1]s WHERE namespace > n) FROM ns WHERE n IS NOT NULL)
`

// AuditNamespaces is auditNamespaces for table.
func AuditNamespaces(table string) string { return fmt.Sprintf(auditNamespaces, table) }

// auditScope picks the primary key an audit read walks — one namespace's,
// the namespaces a principal was seen in, or every namespace's through
// AuditNamespaces — and adds the filters both audit tables share. It
// returns the statement's prefix (a WITH clause or ""), its WHERE clause
// with ? for each argument, and the arguments.
func auditScope(f store.AuditFilter, table string) (string, string, []any) {
	with, where, args := "", ` WHERE namespace = ?`, []any{f.Namespace}
	switch {
	case f.Namespace != "":
	case f.PrincipalID != "":
		// A principal's reads visit the namespaces it was seen in, so
		// their cost does not grow with the namespaces of everyone else.
		where, args = ` WHERE namespace IN (SELECT namespace FROM principal_namespaces WHERE principal_id = ?)`, []any{f.PrincipalID}
	default:
		with, where, args = AuditNamespaces(table), ` WHERE namespace IN (SELECT n FROM ns WHERE n IS NOT NULL)`, nil
	}
	if f.PrincipalID != "" {
		where += ` AND principal_id = ?`
		args = append(args, f.PrincipalID)
	}
	if f.Action != "" {
		where += ` AND action = ?`
		args = append(args, f.Action)
	}
	return with, where, args
}

// AuditEventsQuery is the read of f's audit events, newest first, with ?
// placeholders; cols is the backend's spelling of the event columns. ok is
// false when f asks for an outcome events never have: they are successes
// only.
func AuditEventsQuery(f store.AuditFilter, cols string) (sql string, args []any, ok bool) {
	if f.Outcome != "" && f.Outcome != "ok" {
		return "", nil, false
	}
	with, where, args := auditScope(f, "audit_events")
	where += ` AND id >= ?`
	args = append(args, tessera.IDFloor(f.Since))
	if f.Before != "" {
		where += ` AND id < ?`
		args = append(args, f.Before)
	}
	return with + `SELECT ` + cols + ` FROM audit_events` + where + ` ORDER BY id DESC LIMIT ?`, append(args, f.Limit), true
}

// AuditCountersQuery is the read of f's audit counters, newest minute
// first, with ? placeholders, selecting namespace, minute, principal_id,
// action, outcome and count.
func AuditCountersQuery(f store.AuditFilter) (string, []any) {
	with, where, args := auditScope(f, "audit_counters")
	where += ` AND minute >= ?`
	args = append(args, f.Since.Unix()/60)
	if f.Outcome != "" {
		where += ` AND outcome = ?`
		args = append(args, f.Outcome)
	}
	return with + `SELECT namespace, minute, principal_id, action, outcome, count FROM audit_counters` + where +
		` ORDER BY minute DESC, namespace, principal_id, action, outcome LIMIT ?`, append(args, f.Limit)
}

// PublicEventsQuery is the read of ns's public audit events since a time
// and before an id, newest first, with ? placeholders, selecting id, time,
// action, target, run_id, the task's title and who acted (name and kind).
// A title shows only while its task is public.
func PublicEventsQuery(ns string, since time.Time, before string, limit int) (string, []any) {
	sql := `SELECT e.id, e.time, e.action, e.target, coalesce(e.run_id, ''), coalesce(tk.title, ''),
   coalesce(i.display_name, pr.display_name, ''), coalesce(i.kind, pr.kind, '')
 FROM public_events p
 JOIN audit_events e ON e.namespace = p.namespace AND e.id = p.id
 LEFT JOIN tasks tk ON tk.namespace = e.namespace AND tk.id = e.target AND tk.public
 LEFT JOIN namespace_identities i ON i.namespace = e.namespace AND i.principal_id = e.principal_id
 LEFT JOIN principals pr ON pr.id = e.principal_id
 WHERE p.namespace = ? AND p.id >= ?`
	args := []any{ns, tessera.IDFloor(since)}
	if before != "" {
		sql += ` AND p.id < ?`
		args = append(args, before)
	}
	return sql + ` ORDER BY p.id DESC LIMIT ?`, append(args, limit)
}

// Visibilities are the values of the public column a read with v covers.
func Visibilities(v store.Visibility) []bool {
	if v == store.PublicOnly {
		return []bool{true}
	}
	return []bool{false, true}
}

// Numbered1 rewrites the ? placeholders of sql as $1, $2, …, for a
// backend with numbered parameters. No ? may appear in a literal.
func Numbered1(sql string) string {
	first := 1
	var b strings.Builder
	n := first
	for {
		i := strings.IndexByte(sql, '?')
		if i < 0 {
			b.WriteString(sql)
			return b.String()
		}
		b.WriteString(sql[:i])
		b.WriteString("$" + strconv.Itoa(n))
		n++
		sql = sql[i+1:]
	}
}
