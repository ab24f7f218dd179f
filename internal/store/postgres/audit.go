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
// is read back before the commit. Events inserted one after another join
// one INSERT, so a batch of a hundred claims is one statement of the audit
// trail, not a hundred.
func (t *tx) AuditInsert(_ context.Context, e *tessera.AuditEvent) error {
	if n := len(t.later); n == 0 || t.later[n-1].audit == nil {
		// Its statement is chosen when it is sent (DB.auditInsert); its
		// cost says already that it is not the BEGIN.
		t.later = append(t.later, later{sql: auditInsertManySQL, cost: t.db.costs.of(auditInsertManySQL), audit: &auditRows{}})
	}
	t.later[len(t.later)-1].audit.add(e)
	if e.Public {
		t.tally.unreported(t.db.costs.shapes, "public_events", 1)
	}
	return nil
}

// auditInsert is the statement that inserts rows: one VALUES row, or
// many unnested from arrays, which cost more to send one row alone.
func (db *DB) auditInsert(rows *auditRows) (string, []any, *cost) {
	sql, args := auditInsertManySQL, rows.args()
	if len(rows.id) == 1 {
		sql, args = auditInsertOneSQL, rows.first()
	}
	k := db.costs.of(sql)
	return k.sent(sql), args, k
}

const (
	auditInsertOneSQL = `INSERT INTO audit_events (namespace, id, time, principal_id, key_id, action, target, run_id, status, ip_hash, public,
 task_id, queue, state) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`
	auditInsertManySQL = `INSERT INTO audit_events (namespace, id, time, principal_id, key_id, action, target, run_id, status, ip_hash, public,
 task_id, queue, state)
 SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::int[],
 $10::text[], $11::bool[], $12::text[], $13::text[], $14::text[])`
)

// auditRows are the events of one audit insert, a column each.
type auditRows struct {
	namespace, id, principal, key, action, target, ipHash []string
	runID, taskID, queue, state                           []*string
	time                                                  []int64
	status                                                []int32
	public                                                []bool
}

func (r *auditRows) add(e *tessera.AuditEvent) {
	r.namespace, r.id, r.time = append(r.namespace, e.Namespace), append(r.id, e.ID), append(r.time, ms(e.Time))
	r.principal, r.key, r.action = append(r.principal, e.PrincipalID), append(r.key, e.KeyID), append(r.action, e.Action)
	r.target, r.runID, r.status = append(r.target, e.Target), append(r.runID, orNull(e.RunID)), append(r.status, int32(e.Status))
	r.ipHash, r.public, r.taskID = append(r.ipHash, e.IPHash), append(r.public, e.Public), append(r.taskID, orNull(e.TaskID))
	r.queue, r.state = append(r.queue, orNull(e.Queue)), append(r.state, orNull(e.State))
}

func (r *auditRows) args() []any {
	return []any{r.namespace, r.id, r.time, r.principal, r.key, r.action, r.target, r.runID, r.status, r.ipHash, r.public,
		r.taskID, r.queue, r.state}
}

func (r *auditRows) first() []any {
	return []any{r.namespace[0], r.id[0], r.time[0], r.principal[0], r.key[0], r.action[0], r.target[0], r.runID[0], r.status[0],
		r.ipHash[0], r.public[0], r.taskID[0], r.queue[0], r.state[0]}
}

// orNull is s, or NULL for "".
func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
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
