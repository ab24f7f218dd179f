package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/store/sqlschema"
	"github.com/tessera-dev/tessera/internal/tessera"
)

const auditEventCols = `namespace, id, time, principal_id, key_id, action, target, coalesce(run_id, ''), status, ip_hash, public,
 coalesce(task_id, ''), coalesce(queue, ''), coalesce(state, '')`

// AuditInsert rides with the transaction's next round trip: nothing in it
// reads the event back, and a failure fails the transaction then.
func (t *tx) AuditInsert(_ context.Context, e *tessera.AuditEvent) error {
	t.queue(`INSERT INTO audit_events (namespace, id, time, principal_id, key_id, action, target, run_id, status, ip_hash, public,
 task_id, queue, state) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
		e.Namespace, e.ID, ms(e.Time), e.PrincipalID, e.KeyID, e.Action, e.Target, nullable(e.RunID), e.Status, e.IPHash, e.Public,
		nullable(e.TaskID), nullable(e.Queue), nullable(e.State))
	if e.Public {
		t.tally.unreported(t.db.costs.shapes, "public_events", 1)
	}
	return nil
}

func (t *tx) AuditEvents(ctx context.Context, f store.AuditFilter) ([]tessera.AuditEvent, error) {
	sql, args, ok := sqlschema.AuditEventsQuery(f, auditEventCols)
	if !ok {
		return nil, nil
	}
	var out []tessera.AuditEvent
	err := t.query(ctx, sqlschema.Numbered1(sql), args, func(rows pgx.Rows) error {
		var e tessera.AuditEvent
		var at int64
		if err := rows.Scan(&e.Namespace, &e.ID, &at, &e.PrincipalID, &e.KeyID, &e.Action, &e.Target, &e.RunID, &e.Status, &e.IPHash, &e.Public,
			&e.TaskID, &e.Queue, &e.State); err != nil {
			return err
		}
		e.Time = fromMS(at)
		out = append(out, e)
		return nil
	})
	return out, err
}

func (t *tx) AuditCountersAdd(ctx context.Context, cs []tessera.AuditCounter) error {
	if len(cs) == 0 {
		return nil
	}
	// One statement for the batch; a counter repeated in it is summed
	// first, as ON CONFLICT may not touch one row twice.
	var nss, principals, actions, outcomes []string
	var minutes, counts []int64
	for _, c := range cs {
		nss, principals, actions, outcomes = append(nss, c.Namespace), append(principals, c.PrincipalID), append(actions, c.Action), append(outcomes, c.Outcome)
		minutes, counts = append(minutes, c.Minute.Unix()/60), append(counts, c.Count)
	}
	_, err := t.exec(ctx, `INSERT INTO audit_counters (namespace, minute, principal_id, action, outcome, count)
 SELECT ns, m, p, a, o, sum(n) FROM unnest($1::text[], $2::int8[], $3::text[], $4::text[], $5::text[], $6::int8[]) u(ns, m, p, a, o, n)
 GROUP BY ns, m, p, a, o
 ON CONFLICT (namespace, minute, principal_id, action, outcome) DO UPDATE SET count = audit_counters.count + excluded.count`,
		nss, minutes, principals, actions, outcomes, counts)
	return err
}

func (t *tx) AuditCounters(ctx context.Context, f store.AuditFilter) ([]tessera.AuditCounter, error) {
	sql, args := sqlschema.AuditCountersQuery(f)
	var out []tessera.AuditCounter
	err := t.query(ctx, sqlschema.Numbered1(sql), args, func(rows pgx.Rows) error {
		var c tessera.AuditCounter
		var minute int64
		if err := rows.Scan(&c.Namespace, &minute, &c.PrincipalID, &c.Action, &c.Outcome, &c.Count); err != nil {
			return err
		}
		c.Minute = time.Unix(minute*60, 0).UTC()
		out = append(out, c)
		return nil
	})
	return out, err
}

func (t *tx) SaltGet(ctx context.Context, day string) ([]byte, error) {
	var salt []byte
	err := t.one(ctx, `SELECT salt FROM ip_salts WHERE day = $1`, []any{day}, &salt)
	return salt, err
}

func (t *tx) SaltPut(ctx context.Context, day string, salt []byte) ([]byte, error) {
	if _, err := t.exec(ctx, `INSERT INTO ip_salts (day, salt) VALUES ($1, $2) ON CONFLICT DO NOTHING`, day, salt); err != nil {
		return nil, err
	}
	return t.SaltGet(ctx, day)
}

func (t *tx) IdentityGet(ctx context.Context, ns, principalID string) (*tessera.NamespaceIdentity, error) {
	id := &tessera.NamespaceIdentity{Namespace: ns, PrincipalID: principalID}
	var seen int64
	err := t.one(ctx, `SELECT account, kind, display_name, seen_at FROM namespace_identities WHERE namespace = $1 AND principal_id = $2`,
		[]any{ns, principalID}, &id.Account, &id.Kind, &id.DisplayName, &seen)
	if err != nil {
		return nil, err
	}
	id.SeenAt = fromMS(seen)
	return id, nil
}

func (t *tx) IdentityPut(ctx context.Context, id *tessera.NamespaceIdentity) error {
	_, err := t.exec(ctx, `INSERT INTO namespace_identities (namespace, principal_id, account, kind, display_name, seen_at)
 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (namespace, principal_id) DO UPDATE SET account = excluded.account, kind = excluded.kind,
 display_name = excluded.display_name, seen_at = excluded.seen_at`,
		id.Namespace, id.PrincipalID, id.Account, id.Kind, id.DisplayName, ms(id.SeenAt))
	return err
}

func (t *tx) PrincipalNamespaceAdd(ctx context.Context, principalID, ns string) error {
	_, err := t.exec(ctx, `INSERT INTO principal_namespaces (principal_id, namespace) VALUES ($1, $2) ON CONFLICT DO NOTHING`, principalID, ns)
	return err
}

func (t *tx) PrincipalTouch(ctx context.Context, id string, at time.Time) error {
	return mustChange(t.exec(ctx, `UPDATE principals SET last_used_at = $1 WHERE id = $2`, ms(at), id))
}

func (t *tx) AuditEventsPurge(ctx context.Context, before time.Time, limit int) (int, error) {
	var public int64
	n, err := t.roundTrip(ctx, sqlschema.AuditNamespaces("audit_events")+`DELETE FROM audit_events WHERE ctid = ANY(ARRAY(
 SELECT e.ctid FROM ns CROSS JOIN LATERAL (
   SELECT ctid FROM audit_events WHERE namespace = ns.n AND id < $1 ORDER BY id LIMIT $2) e
 WHERE ns.n IS NOT NULL LIMIT $2)) RETURNING public`, []any{tessera.IDFloor(before), limit}, func(rows pgx.Rows) error {
		var p bool
		err := rows.Scan(&p)
		if p {
			public++
		}
		return err
	})
	t.tally.unreported(t.db.costs.shapes, "public_events", public)
	return int(n), err
}

func (t *tx) AuditCountersPurge(ctx context.Context, before time.Time, limit int) (int, error) {
	n, err := t.exec(ctx, sqlschema.AuditNamespaces("audit_counters")+`DELETE FROM audit_counters WHERE ctid = ANY(ARRAY(
 SELECT c.ctid FROM ns CROSS JOIN LATERAL (
   SELECT ctid FROM audit_counters WHERE namespace = ns.n AND minute < $1 ORDER BY minute LIMIT $2) c
 WHERE ns.n IS NOT NULL LIMIT $2))`, before.Unix()/60, limit)
	return int(n), err
}

func (t *tx) IdempotencyPurge(ctx context.Context, before time.Time, limit int) (int, error) {
	n, err := t.exec(ctx, `DELETE FROM idempotency WHERE ctid = ANY(ARRAY(
 SELECT ctid FROM idempotency WHERE created_at < $1 ORDER BY created_at LIMIT $2))`, ms(before), limit)
	return int(n), err
}

func (t *tx) SaltsPurge(ctx context.Context, beforeDay string) (int, error) {
	n, err := t.exec(ctx, `DELETE FROM ip_salts WHERE day < $1`, beforeDay)
	return int(n), err
}

func (t *tx) PrincipalsPurge(ctx context.Context, before time.Time, limit int) (int, error) {
	ids, err := t.SessionsExpired(ctx, before, limit) // the principals due, through the purge index
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	for _, sql := range []string{
		`DELETE FROM keys WHERE principal_id = ANY($1)`,
		`DELETE FROM principal_namespaces WHERE principal_id = ANY($1)`,
		`DELETE FROM session_quotas WHERE principal_id = ANY($1)`,
	} {
		if _, err := t.exec(ctx, sql, ids); err != nil {
			return 0, err
		}
	}
	n, err := t.exec(ctx, `DELETE FROM principals WHERE id = ANY($1)`, ids)
	return int(n), err
}
