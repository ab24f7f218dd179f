package sqlschema

import (
	"encoding/json"
	"time"

	"github.com/tessera-dev/tessera/internal/tessera"
)

// The statements of task gates (store.GateTx), the same on both backends.
// Times are milliseconds; an optional value absent is NULL, read back as
// ” or 0.
const (
	GateInsert = `INSERT INTO task_gates (namespace, task_id, key, kind, message, schema, url, timeout_at, due_at, on_timeout, opened_at, run_id)
 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`
	GatesOf = `SELECT key, kind, message, coalesce(schema, ''), coalesce(url, ''), coalesce(timeout_at, 0), on_timeout, opened_at,
 coalesce(run_id, ''), coalesce(action, ''), coalesce(content, ''), coalesce(answered_by, ''), coalesce(answered_at, 0)
 FROM task_gates WHERE namespace = ? AND task_id = ? ORDER BY opened_at, key`
	GateAnswer = `UPDATE task_gates SET action = ?, content = ?, answered_by = ?, answered_at = ?, due_at = NULL
 WHERE namespace = ? AND task_id = ? AND key = ? AND action IS NULL`
	// GatesTimingOut's predicate is the partial index task_gates_due's.
	GatesTimingOut = `SELECT namespace, task_id, key, due_at FROM task_gates
 WHERE due_at IS NOT NULL ORDER BY due_at LIMIT ?`
)

// GateArgs are GateInsert's arguments for g of task (ns, taskID).
func GateArgs(ns, taskID string, g *tessera.Gate) []any {
	var timeout any
	if g.TimeoutAt != nil {
		timeout = g.TimeoutAt.UnixMilli()
	}
	return []any{ns, taskID, g.Key, g.Kind, g.Message, nullString(string(g.Schema)), nullString(g.URL), timeout, timeout, g.OnTimeout,
		g.OpenedAt.UnixMilli(), nullString(g.RunID)}
}

// GateAnswerArgs are GateAnswer's arguments.
func GateAnswerArgs(ns, taskID, key string, a *tessera.GateAnswer) []any {
	return []any{a.Action, nullString(string(a.Content)), nullString(a.AnsweredBy), a.At.UnixMilli(), ns, taskID, key}
}

// GateRow is a row of GatesOf as scanned, column by column.
type GateRow struct {
	Key, Kind, Message, Schema, URL string
	TimeoutAt                       int64
	OnTimeout                       string
	OpenedAt                        int64
	RunID, Action, Content, By      string
	AnsweredAt                      int64
}

// Dest are pointers to r's fields in GatesOf's column order.
func (r *GateRow) Dest() []any {
	return []any{&r.Key, &r.Kind, &r.Message, &r.Schema, &r.URL, &r.TimeoutAt, &r.OnTimeout, &r.OpenedAt,
		&r.RunID, &r.Action, &r.Content, &r.By, &r.AnsweredAt}
}

// Gate is the gate r holds.
func (r *GateRow) Gate(ns, taskID string) tessera.Gate {
	g := tessera.Gate{Namespace: ns, TaskID: taskID, Key: r.Key, Kind: r.Kind, Message: r.Message, URL: r.URL,
		OnTimeout: r.OnTimeout, OpenedAt: fromMS(r.OpenedAt), RunID: r.RunID}
	if r.Schema != "" {
		g.Schema = json.RawMessage(r.Schema)
	}
	if r.TimeoutAt != 0 {
		t := fromMS(r.TimeoutAt)
		g.TimeoutAt = &t
	}
	if r.Action != "" {
		g.Answer = &tessera.GateAnswer{Action: r.Action, AnsweredBy: r.By, At: fromMS(r.AnsweredAt)}
		if r.Content != "" {
			g.Answer.Content = json.RawMessage(r.Content)
		}
	}
	return g
}

func fromMS(v int64) time.Time { return time.UnixMilli(v).UTC() }

// nullString is s, or NULL for "".
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}
