package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/store/sqlschema"
	"github.com/tessera-dev/tessera/internal/tessera"
)

const principalCols = `id, kind, account, display_name, created_at, last_used_at, purge_at`

// principalRow scans the principal columns.
type principalRow struct {
	p                 tessera.Principal
	created           int64
	lastUsed, purgeAt *int64
}

func (r *principalRow) dest() []any {
	return []any{&r.p.ID, &r.p.Kind, &r.p.Account, &r.p.DisplayName, &r.created, &r.lastUsed, &r.purgeAt}
}

func (r *principalRow) principal() *tessera.Principal {
	p := r.p
	p.CreatedAt, p.LastUsedAt, p.PurgeAt = fromMS(r.created), timePtr(r.lastUsed), timePtr(r.purgeAt)
	return &p
}

func (t *tx) PrincipalCreate(ctx context.Context, p *tessera.Principal) error {
	return t.insert(ctx, "insert principal "+p.ID, `INSERT INTO principals (`+principalCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7)
 ON CONFLICT DO NOTHING`, p.ID, p.Kind, p.Account, p.DisplayName, ms(p.CreatedAt), msPtr(p.LastUsedAt), msPtr(p.PurgeAt))
}

func (t *tx) PrincipalGet(ctx context.Context, id string) (*tessera.Principal, error) {
	var r principalRow
	if err := t.one(ctx, `SELECT `+principalCols+` FROM principals WHERE id = $1`, []any{id}, r.dest()...); err != nil {
		return nil, err
	}
	return r.principal(), nil
}

func (t *tx) PrincipalUpdate(ctx context.Context, p *tessera.Principal) error {
	return mustChange(t.exec(ctx, `UPDATE principals SET kind = $1, account = $2, display_name = $3, last_used_at = $4, purge_at = $5 WHERE id = $6`,
		p.Kind, p.Account, p.DisplayName, msPtr(p.LastUsedAt), msPtr(p.PurgeAt), p.ID))
}

func (t *tx) PrincipalList(ctx context.Context, after string, limit int) ([]tessera.Principal, error) {
	var out []tessera.Principal
	err := t.query(ctx, `SELECT `+principalCols+` FROM principals WHERE id > $1 ORDER BY id LIMIT $2`, []any{after, limit},
		func(rows pgx.Rows) error {
			var r principalRow
			if err := rows.Scan(r.dest()...); err != nil {
				return err
			}
			out = append(out, *r.principal())
			return nil
		})
	return out, err
}

func (t *tx) PrincipalAny(ctx context.Context) (bool, error) {
	var one int
	err := t.one(ctx, `SELECT 1 FROM principals LIMIT 1`, nil, &one)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

const keyCols = `id, principal_id, secret_hash, scopes, expires_at, revoked_at, created_at`

type keyRow struct {
	k                tessera.Key
	scopes           string
	expires, revoked *int64
	created          int64
}

func (r *keyRow) dest() []any {
	return []any{&r.k.ID, &r.k.PrincipalID, &r.k.SecretHash, &r.scopes, &r.expires, &r.revoked, &r.created}
}

func (r *keyRow) key() (*tessera.Key, error) {
	k := r.k
	k.ExpiresAt, k.RevokedAt, k.CreatedAt = timePtr(r.expires), timePtr(r.revoked), fromMS(r.created)
	if err := json.Unmarshal([]byte(r.scopes), &k.Scopes); err != nil {
		return nil, fmt.Errorf("key %s scopes: %w", k.ID, err)
	}
	return &k, nil
}

func (t *tx) KeyCreate(ctx context.Context, k *tessera.Key) error {
	scopes, err := json.Marshal(k.Scopes)
	if err != nil {
		return err
	}
	return t.insert(ctx, "insert key "+k.ID, `INSERT INTO keys (`+keyCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`,
		k.ID, k.PrincipalID, k.SecretHash, string(scopes), msPtr(k.ExpiresAt), msPtr(k.RevokedAt), ms(k.CreatedAt))
}

func (t *tx) KeyLookup(ctx context.Context, id string) (*tessera.Key, *tessera.Principal, error) {
	var kr keyRow
	var pr principalRow
	err := t.one(ctx, `SELECT k.id, k.principal_id, k.secret_hash, k.scopes, k.expires_at, k.revoked_at, k.created_at,
 p.id, p.kind, p.account, p.display_name, p.created_at, p.last_used_at, p.purge_at
 FROM keys k JOIN principals p ON p.id = k.principal_id WHERE k.id = $1`, []any{id}, append(kr.dest(), pr.dest()...)...)
	if err != nil {
		return nil, nil, err
	}
	k, err := kr.key()
	if err != nil {
		return nil, nil, err
	}
	return k, pr.principal(), nil
}

func (t *tx) KeyList(ctx context.Context, after string, limit int) ([]tessera.Key, error) {
	var out []tessera.Key
	err := t.query(ctx, `SELECT `+keyCols+` FROM keys WHERE id > $1 ORDER BY id LIMIT $2`, []any{after, limit},
		func(rows pgx.Rows) error {
			var r keyRow
			if err := rows.Scan(r.dest()...); err != nil {
				return err
			}
			k, err := r.key()
			if err == nil {
				out = append(out, *k)
			}
			return err
		})
	return out, err
}

func (t *tx) KeyRevoke(ctx context.Context, id string, at time.Time) error {
	return mustChange(t.exec(ctx, `UPDATE keys SET revoked_at = coalesce(revoked_at, $1) WHERE id = $2`, ms(at), id))
}

func (t *tx) NamespaceEnsure(ctx context.Context, name string, now time.Time) (bool, error) {
	n, err := t.exec(ctx, `INSERT INTO namespaces (name, created_at) VALUES ($1, $2) ON CONFLICT DO NOTHING`, name, ms(now))
	return n > 0, err
}

func (t *tx) NamespaceList(ctx context.Context, after string, limit int) ([]store.Namespace, error) {
	var out []store.Namespace
	err := t.query(ctx, `SELECT name, created_at FROM namespaces WHERE name > $1 ORDER BY name LIMIT $2`, []any{after, limit},
		func(rows pgx.Rows) error {
			var n store.Namespace
			var created int64
			if err := rows.Scan(&n.Name, &created); err != nil {
				return err
			}
			n.CreatedAt = fromMS(created)
			out = append(out, n)
			return nil
		})
	return out, err
}

func (t *tx) NamespacePurge(ctx context.Context, ns string, limit int) (int, error) {
	return sqlschema.PurgeNamespace(ctx, func(ctx context.Context, sql string, args ...any) (int64, error) {
		sql = sqlschema.Numbered1(sql)
		if strings.HasPrefix(sql, "DELETE FROM tasks ") {
			return t.deleteTasks(ctx, sql, args...)
		}
		return t.exec(ctx, sql, args...)
	}, ns, limit)
}

func (t *tx) IdempotencyGet(ctx context.Context, ns, principalID, route, key string) (*store.Idempotency, error) {
	e := &store.Idempotency{Namespace: ns, PrincipalID: principalID, Route: route, Key: key}
	var created int64
	err := t.one(ctx, `SELECT request_hash, response, created_at FROM idempotency WHERE namespace = $1 AND principal_id = $2 AND route = $3 AND key = $4`,
		[]any{ns, principalID, route, key}, &e.RequestHash, &e.Response, &created)
	if err != nil {
		return nil, err
	}
	e.CreatedAt = fromMS(created)
	return e, nil
}

// IdempotencyPut inserts first-wins: a concurrent insert of the key is
// waited for, and if it commits this one stores nothing.
func (t *tx) IdempotencyPut(ctx context.Context, e *store.Idempotency) (bool, error) {
	n, err := t.exec(ctx, `INSERT INTO idempotency (namespace, principal_id, route, key, request_hash, response, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)
 ON CONFLICT DO NOTHING`, e.Namespace, e.PrincipalID, e.Route, e.Key, e.RequestHash, e.Response, ms(e.CreatedAt))
	return n > 0, err
}
