package sqlite

import (
	"context"
	"slices"

	"encoding/json"
	"fmt"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/store/sqlschema"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// tx implements store.Tx on the connection that holds the transaction.
type tx struct {
	c      *conn
	topics []string // notified when the transaction commits
}

var _ store.Tx = (*tx)(nil)

func (t *tx) Notify(_ context.Context, topic string) {
	if !slices.Contains(t.topics, topic) {
		t.topics = append(t.topics, topic)
	}
}

// one runs a query expected to return at most one row; ErrNotFound if none.
func (t *tx) one(ctx context.Context, sql string, args []any, scan func(*sqlite3.Stmt) error) error {
	found := false
	err := t.c.query(ctx, sql, args, func(s *sqlite3.Stmt) error {
		found = true
		return scan(s)
	})
	if err == nil && !found {
		return store.ErrNotFound
	}
	return err
}

const principalCols = `id, kind, account, display_name, created_at, last_used_at, purge_at`

func scanPrincipal(s *sqlite3.Stmt, off int) *tessera.Principal {
	return &tessera.Principal{
		ID:          s.ColumnText(off),
		Kind:        s.ColumnText(off + 1),
		Account:     s.ColumnText(off + 2),
		DisplayName: s.ColumnText(off + 3),
		CreatedAt:   colTime(s, off+4),
		LastUsedAt:  colTimePtr(s, off+5),
		PurgeAt:     colTimePtr(s, off+6),
	}
}

func (t *tx) PrincipalCreate(ctx context.Context, p *tessera.Principal) error {
	_, err := t.c.exec(ctx, `INSERT INTO principals (`+principalCols+`) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		p.ID, p.Kind, p.Account, p.DisplayName, p.CreatedAt, p.LastUsedAt, p.PurgeAt)
	if err != nil {
		return fmt.Errorf("insert principal %s: %w", p.ID, err)
	}
	return nil
}

func (t *tx) PrincipalGet(ctx context.Context, id string) (*tessera.Principal, error) {
	var p *tessera.Principal
	err := t.one(ctx, `SELECT `+principalCols+` FROM principals WHERE id = ?`, []any{id}, func(s *sqlite3.Stmt) error {
		p = scanPrincipal(s, 0)
		return nil
	})
	return p, err
}

func (t *tx) PrincipalUpdate(ctx context.Context, p *tessera.Principal) error {
	return mustChange(t.c.exec(ctx, `UPDATE principals SET kind = ?, account = ?, display_name = ?, last_used_at = ?, purge_at = ? WHERE id = ?`,
		p.Kind, p.Account, p.DisplayName, p.LastUsedAt, p.PurgeAt, p.ID))
}

func (t *tx) PrincipalList(ctx context.Context, after string, limit int) ([]tessera.Principal, error) {
	var out []tessera.Principal
	err := t.c.query(ctx, `SELECT `+principalCols+` FROM principals WHERE id > ? ORDER BY id LIMIT ?`, []any{after, limit},
		func(s *sqlite3.Stmt) error {
			out = append(out, *scanPrincipal(s, 0))
			return nil
		})
	return out, err
}

func (t *tx) PrincipalAny(ctx context.Context) (bool, error) {
	err := t.one(ctx, `SELECT 1 FROM principals LIMIT 1`, nil, func(*sqlite3.Stmt) error { return nil })
	if err == store.ErrNotFound {
		return false, nil
	}
	return err == nil, err
}

const keyCols = `id, principal_id, secret_hash, scopes, expires_at, revoked_at, created_at`

func scanKey(s *sqlite3.Stmt) (*tessera.Key, error) {
	k := &tessera.Key{
		ID:          s.ColumnText(0),
		PrincipalID: s.ColumnText(1),
		SecretHash:  colBlob(s, 2),
		ExpiresAt:   colTimePtr(s, 4),
		RevokedAt:   colTimePtr(s, 5),
		CreatedAt:   colTime(s, 6),
	}
	if err := json.Unmarshal([]byte(s.ColumnText(3)), &k.Scopes); err != nil {
		return nil, fmt.Errorf("key %s scopes: %w", k.ID, err)
	}
	return k, nil
}

func (t *tx) KeyCreate(ctx context.Context, k *tessera.Key) error {
	scopes, err := json.Marshal(k.Scopes)
	if err != nil {
		return err
	}
	_, err = t.c.exec(ctx, `INSERT INTO keys (`+keyCols+`) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		k.ID, k.PrincipalID, k.SecretHash, string(scopes), k.ExpiresAt, k.RevokedAt, k.CreatedAt)
	if err != nil {
		return fmt.Errorf("insert key %s: %w", k.ID, err)
	}
	return nil
}

func (t *tx) KeyLookup(ctx context.Context, id string) (*tessera.Key, *tessera.Principal, error) {
	var (
		k   *tessera.Key
		p   *tessera.Principal
		err error
	)
	qerr := t.one(ctx, `SELECT k.id, k.principal_id, k.secret_hash, k.scopes, k.expires_at, k.revoked_at, k.created_at, `+
		`p.id, p.kind, p.account, p.display_name, p.created_at, p.last_used_at, p.purge_at `+
		`FROM keys k JOIN principals p ON p.id = k.principal_id WHERE k.id = ?`, []any{id},
		func(s *sqlite3.Stmt) error {
			k, err = scanKey(s)
			p = scanPrincipal(s, 7)
			return err
		})
	return k, p, qerr
}

func (t *tx) KeyList(ctx context.Context, after string, limit int) ([]tessera.Key, error) {
	var out []tessera.Key
	err := t.c.query(ctx, `SELECT `+keyCols+` FROM keys WHERE id > ? ORDER BY id LIMIT ?`, []any{after, limit},
		func(s *sqlite3.Stmt) error {
			k, err := scanKey(s)
			if err == nil {
				out = append(out, *k)
			}
			return err
		})
	return out, err
}

func (t *tx) KeyRevoke(ctx context.Context, id string, at time.Time) error {
	return mustChange(t.c.exec(ctx, `UPDATE keys SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?`, at, id))
}

func (t *tx) NamespaceEnsure(ctx context.Context, name string, now time.Time) (bool, error) {
	n, err := t.c.exec(ctx, `INSERT INTO namespaces (name, created_at) VALUES (?, ?) ON CONFLICT DO NOTHING`, name, now)
	return n > 0, err
}

func (t *tx) NamespaceList(ctx context.Context, after string, limit int) ([]store.Namespace, error) {
	var out []store.Namespace
	err := t.c.query(ctx, `SELECT name, created_at FROM namespaces WHERE name > ? ORDER BY name LIMIT ?`, []any{after, limit},
		func(s *sqlite3.Stmt) error {
			out = append(out, store.Namespace{Name: s.ColumnText(0), CreatedAt: colTime(s, 1)})
			return nil
		})
	return out, err
}

func (t *tx) NamespacePurge(ctx context.Context, ns string, limit int) (int, error) {
	return sqlschema.PurgeNamespace(ctx, t.c.exec, ns, limit)
}

func (t *tx) IdempotencyGet(ctx context.Context, ns, principalID, route, key string) (*store.Idempotency, error) {
	var e *store.Idempotency
	err := t.one(ctx, `SELECT request_hash, response, created_at FROM idempotency WHERE namespace = ? AND principal_id = ? AND route = ? AND key = ?`,
		[]any{ns, principalID, route, key}, func(s *sqlite3.Stmt) error {
			e = &store.Idempotency{Namespace: ns, PrincipalID: principalID, Route: route, Key: key,
				RequestHash: colBlob(s, 0), Response: colBlob(s, 1), CreatedAt: colTime(s, 2)}
			return nil
		})
	return e, err
}

// idempotencyIDsPerMS is the id rule of migration 0008: an entry's id is
// its making time in ms times this, raised past the last id, so ids order
// entries by age and retention deletes an id range.
const idempotencyIDsPerMS = "4096"

func (t *tx) IdempotencyPut(ctx context.Context, e *store.Idempotency) (bool, error) {
	// Reading the last id is one step to the tree's edge.
	n, err := t.c.exec(ctx, `INSERT INTO idempotency (id, namespace, principal_id, route, key, request_hash, response, created_at)
 VALUES (max(? * `+idempotencyIDsPerMS+`, coalesce((SELECT max(id) FROM idempotency), 0) + 1), ?, ?, ?, ?, ?, ?, ?)
 ON CONFLICT DO NOTHING`, e.CreatedAt, e.Namespace, e.PrincipalID, e.Route, e.Key, e.RequestHash, e.Response, e.CreatedAt)
	return n > 0, err
}
