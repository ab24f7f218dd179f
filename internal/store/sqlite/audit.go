package sqlite

import (
	"context"

	"strings"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/store/sqlschema"
	"github.com/tessera-dev/tessera/internal/tessera"
)

const auditEventCols = `namespace, id, time, principal_id, key_id, action, target, run_id, status, ip_hash, public, task_id, queue, state`

func (t *tx) AuditInsert(ctx context.Context, e *tessera.AuditEvent) error {
	_, err := t.c.exec(ctx, `INSERT INTO audit_events (`+auditEventCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		e.Namespace, e.ID, e.Time, e.PrincipalID, e.KeyID, e.Action, e.Target, nullText(e.RunID), e.Status, e.IPHash, e.Public,
		nullText(e.TaskID), nullText(e.Queue), nullText(e.State))
	return err
}

func (t *tx) AuditEvents(ctx context.Context, f store.AuditFilter) ([]tessera.AuditEvent, error) {
	sql, args, ok := sqlschema.AuditEventsQuery(f, auditEventCols)
	if !ok {
		return nil, nil
	}
	var out []tessera.AuditEvent
	err := t.c.query(ctx, sql, args, func(s *sqlite3.Stmt) error {
		out = append(out, tessera.AuditEvent{
			Namespace: s.ColumnText(0), ID: s.ColumnText(1), Time: colTime(s, 2), PrincipalID: s.ColumnText(3),
			KeyID: s.ColumnText(4), Action: s.ColumnText(5), Target: s.ColumnText(6), RunID: s.ColumnText(7),
			Status: s.ColumnInt(8), IPHash: s.ColumnText(9), Public: s.ColumnBool(10),
			TaskID: s.ColumnText(11), Queue: s.ColumnText(12), State: s.ColumnText(13),
		})
		return nil
	})
	return out, err
}

func (t *tx) AuditCountersAdd(ctx context.Context, cs []tessera.AuditCounter) error {
	for _, c := range cs {
		if _, err := t.c.exec(ctx, `INSERT INTO audit_counters (namespace, minute, principal_id, action, outcome, count)
 VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO UPDATE SET count = count + excluded.count`,
			c.Namespace, c.Minute.Unix()/60, c.PrincipalID, c.Action, c.Outcome, c.Count); err != nil {
			return err
		}
	}
	return nil
}

func (t *tx) AuditCounters(ctx context.Context, f store.AuditFilter) ([]tessera.AuditCounter, error) {
	sql, args := sqlschema.AuditCountersQuery(f)
	var out []tessera.AuditCounter
	err := t.c.query(ctx, sql, args, func(s *sqlite3.Stmt) error {
		out = append(out, tessera.AuditCounter{
			Namespace: s.ColumnText(0), Minute: time.Unix(s.ColumnInt64(1)*60, 0).UTC(), PrincipalID: s.ColumnText(2),
			Action: s.ColumnText(3), Outcome: s.ColumnText(4), Count: s.ColumnInt64(5),
		})
		return nil
	})
	return out, err
}

func (t *tx) SaltGet(ctx context.Context, day string) ([]byte, error) {
	var salt []byte
	err := t.one(ctx, `SELECT salt FROM ip_salts WHERE day = ?`, []any{day}, func(s *sqlite3.Stmt) error {
		salt = colBlob(s, 0)
		return nil
	})
	return salt, err
}

func (t *tx) SaltPut(ctx context.Context, day string, salt []byte) ([]byte, error) {
	if _, err := t.c.exec(ctx, `INSERT INTO ip_salts (day, salt) VALUES (?, ?) ON CONFLICT DO NOTHING`, day, salt); err != nil {
		return nil, err
	}
	return t.SaltGet(ctx, day)
}

func (t *tx) IdentityGet(ctx context.Context, ns, principalID string) (*tessera.NamespaceIdentity, error) {
	var id *tessera.NamespaceIdentity
	err := t.one(ctx, `SELECT account, kind, display_name, seen_at FROM namespace_identities WHERE namespace = ? AND principal_id = ?`,
		[]any{ns, principalID}, func(s *sqlite3.Stmt) error {
			id = &tessera.NamespaceIdentity{Namespace: ns, PrincipalID: principalID, Account: s.ColumnText(0),
				Kind: s.ColumnText(1), DisplayName: s.ColumnText(2), SeenAt: colTime(s, 3)}
			return nil
		})
	return id, err
}

func (t *tx) IdentityPut(ctx context.Context, id *tessera.NamespaceIdentity) error {
	_, err := t.c.exec(ctx, `INSERT INTO namespace_identities (namespace, principal_id, account, kind, display_name, seen_at)
 VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO UPDATE SET account = excluded.account, kind = excluded.kind,
 display_name = excluded.display_name, seen_at = excluded.seen_at`,
		id.Namespace, id.PrincipalID, id.Account, id.Kind, id.DisplayName, id.SeenAt)
	return err
}

func (t *tx) PrincipalNamespaceAdd(ctx context.Context, principalID, ns string) error {
	_, err := t.c.exec(ctx, `INSERT INTO principal_namespaces (principal_id, namespace) VALUES (?, ?) ON CONFLICT DO NOTHING`, principalID, ns)
	return err
}

func (t *tx) PrincipalTouch(ctx context.Context, id string, at time.Time) error {
	return mustChange(t.c.exec(ctx, `UPDATE principals SET last_used_at = ? WHERE id = ?`, at, id))
}

func (t *tx) AuditEventsPurge(ctx context.Context, before time.Time, limit int) (int, error) {
	n, err := t.c.exec(ctx, sqlschema.AuditNamespaces("audit_events")+`DELETE FROM audit_events WHERE (namespace, id) IN (
 SELECT namespace, id FROM audit_events WHERE namespace IN (SELECT n FROM ns WHERE n IS NOT NULL) AND id < ? LIMIT ?)`,
		tessera.IDFloor(before), limit)
	return int(n), err
}

func (t *tx) AuditCountersPurge(ctx context.Context, before time.Time, limit int) (int, error) {
	n, err := t.c.exec(ctx, sqlschema.AuditNamespaces("audit_counters")+`DELETE FROM audit_counters WHERE (namespace, minute, principal_id, action, outcome) IN (
 SELECT namespace, minute, principal_id, action, outcome FROM audit_counters
 WHERE namespace IN (SELECT n FROM ns WHERE n IS NOT NULL) AND minute < ? LIMIT ?)`, before.Unix()/60, limit)
	return int(n), err
}

func (t *tx) IdempotencyPurge(ctx context.Context, before time.Time, limit int) (int, error) {
	// An entry made before the cutoff has an id below it
	// (idempotencyIDsPerMS), unless the clock stepped back since, and then
	// it waits until the time its id says.
	n, err := t.c.exec(ctx, `DELETE FROM idempotency WHERE id IN (
 SELECT id FROM idempotency WHERE id < ? * `+idempotencyIDsPerMS+` ORDER BY id LIMIT ?)`, before, limit)
	return int(n), err
}

func (t *tx) SaltsPurge(ctx context.Context, beforeDay string) (int, error) {
	n, err := t.c.exec(ctx, `DELETE FROM ip_salts WHERE day < ?`, beforeDay)
	return int(n), err
}

func (t *tx) PrincipalsPurge(ctx context.Context, before time.Time, limit int) (int, error) {
	var ids []any
	err := t.c.query(ctx, `SELECT id FROM principals WHERE purge_at IS NOT NULL AND purge_at < ? ORDER BY purge_at LIMIT ?`,
		[]any{before, limit}, func(s *sqlite3.Stmt) error {
			ids = append(ids, s.ColumnText(0))
			return nil
		})
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	list := "?" + strings.Repeat(", ?", len(ids)-1)
	if _, err := t.c.exec(ctx, `DELETE FROM keys WHERE principal_id IN (`+list+`)`, ids...); err != nil {
		return 0, err
	}
	if _, err := t.c.exec(ctx, `DELETE FROM principal_namespaces WHERE principal_id IN (`+list+`)`, ids...); err != nil {
		return 0, err
	}
	if _, err := t.c.exec(ctx, `DELETE FROM session_quotas WHERE principal_id IN (`+list+`)`, ids...); err != nil {
		return 0, err
	}
	n, err := t.c.exec(ctx, `DELETE FROM principals WHERE id IN (`+list+`)`, ids...)
	return int(n), err
}
