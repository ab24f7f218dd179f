package core

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"time"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/ids"
	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// Administration bounds.
const (
	MaxAccountLen     = 128
	MaxDisplayNameLen = 128
	MaxScopes         = 16
)

// PrincipalParams creates a principal.
type PrincipalParams struct {
	Kind        string `json:"kind"`
	Account     string `json:"account,omitempty"`
	DisplayName string `json:"display_name,omitempty"`
}

// CreatePrincipal creates a principal (admin).
func (s *Service) CreatePrincipal(ctx context.Context, a *auth.Actor, p PrincipalParams) (*tessera.Principal, error) {
	a, err := s.authorize(ctx, a, "", ActPrincipalNew)
	if err != nil {
		return nil, err
	}
	now := s.clock.Now()
	pr := &tessera.Principal{ID: ids.New(now), Kind: p.Kind, Account: p.Account, DisplayName: p.DisplayName, CreatedAt: now}
	err = s.audited(ctx, a, tessera.MainNamespace, ActPrincipalNew, func(tx store.Tx, ev *tessera.AuditEvent) error {
		ev.Target, ev.Status = pr.ID, 201
		return tx.PrincipalCreate(ctx, pr)
	})
	return pr, err
}

// PrincipalPatch changes a principal; nil fields stay as they are.
type PrincipalPatch struct {
	Kind        *string `json:"kind,omitempty"`
	Account     *string `json:"account,omitempty"`
	DisplayName *string `json:"display_name,omitempty"`
}

// UpdatePrincipal changes a principal (admin). Its cached keys are dropped
// on every node, so the change takes effect on the next request.
func (s *Service) UpdatePrincipal(ctx context.Context, a *auth.Actor, id string, p PrincipalPatch) (*tessera.Principal, error) {
	a, err := s.authorize(ctx, a, "", ActPrincipalEdit)
	if err != nil {
		return nil, err
	}
	var pr *tessera.Principal
	err = s.audited(ctx, a, tessera.MainNamespace, ActPrincipalEdit, func(tx store.Tx, ev *tessera.AuditEvent) error {
		ev.Target = id
		var err error
		if pr, err = tx.PrincipalGet(ctx, id); err != nil {
			return notFound(err, "principal", id)
		}
		if pr.Kind == tessera.KindAnonymous && p.Kind != nil {
			return tessera.Errorf(tessera.CodeInvalidState, "an anonymous principal's kind cannot change")
		}
		if p.Kind != nil {
			pr.Kind = *p.Kind
		}
		if p.Account != nil {
			pr.Account = *p.Account
		}
		if p.DisplayName != nil {
			pr.DisplayName = *p.DisplayName
		}
		// Every node drops the principal's cached keys once this commits.
		tx.Notify(ctx, principalTopic(id))
		return tx.PrincipalUpdate(ctx, pr)
	})
	if err != nil {
		return nil, err
	}
	return pr, nil
}

// PrincipalPage is one page of principals.
type PrincipalPage struct {
	Principals []tessera.Principal `json:"principals"`
	NextCursor string              `json:"next_cursor,omitempty"`
}

// ListPrincipals lists principals by id (admin).
func (s *Service) ListPrincipals(ctx context.Context, a *auth.Actor, cursor string, limit int) (*PrincipalPage, error) {
	a, after, limit, err := s.adminPage(ctx, a, ActPrincipalList, cursor, limit)
	if err != nil {
		return nil, err
	}
	page := &PrincipalPage{Principals: []tessera.Principal{}}
	err = s.auditedRead(ctx, a, tessera.MainNamespace, ActPrincipalList, func(tx store.Tx, ev *tessera.AuditEvent) error {
		ev.Target = "principals"
		ps, err := tx.PrincipalList(ctx, after, limit+1)
		if len(ps) > limit {
			ps = ps[:limit]
			page.NextCursor = encodeCursor(ps[limit-1].ID)
		}
		page.Principals = append(page.Principals, ps...)
		return err
	})
	return page, err
}

func (s *Service) adminPage(ctx context.Context, a *auth.Actor, op, cursor string, limit int) (*auth.Actor, string, int, error) {
	a, err := s.authorize(ctx, a, "", op)
	if err != nil {
		return nil, "", 0, err
	}
	after, limit, err := pageParams(cursor, limit)
	if err != nil {
		return nil, "", 0, err
	}
	return a, after, limit, nil
}

// KeyParams creates a key.
type KeyParams struct {
	PrincipalID string     `json:"principal_id"`
	Scopes      []string   `json:"scopes"`
	ExpiresAt   *time.Time `json:"expires_at,omitempty"`
}

// NewKey is a created key with its secret, shown this once.
type NewKey struct {
	tessera.Key
	Secret string `json:"key"`
}

// CreateKey mints a key for a principal (admin).
func (s *Service) CreateKey(ctx context.Context, a *auth.Actor, p KeyParams) (*NewKey, error) {
	a, err := s.authorize(ctx, a, "", ActKeyNew)
	if err != nil {
		return nil, err
	}
	now := s.clock.Now()
	if p.ExpiresAt != nil && !p.ExpiresAt.After(now) {
		return nil, tessera.Invalid("expires_at", "expires_at must be in the future")
	}
	var out *NewKey
	err = s.audited(ctx, a, tessera.MainNamespace, ActKeyNew, func(tx store.Tx, ev *tessera.AuditEvent) error {
		ev.Status = 201
		pr, err := tx.PrincipalGet(ctx, p.PrincipalID)
		if errors.Is(err, store.ErrNotFound) {
			return tessera.Invalid("principal_id", "no principal %q", p.PrincipalID)
		}
		if err != nil {
			return err
		}
		if pr.Kind == tessera.KindAnonymous {
			return tessera.Errorf(tessera.CodeInvalidState, "a demo session's principal has its one key")
		}
		out, err = createKey(ctx, tx, p.PrincipalID, p.Scopes, p.ExpiresAt, now)
		if out != nil {
			ev.Target = out.ID
		}
		return err
	})
	return out, err
}

func createKey(ctx context.Context, tx store.Tx, principalID string, scopes []string, expires *time.Time, now time.Time) (*NewKey, error) {
	secret, id, hash := auth.NewKey()
	k := tessera.Key{ID: id, PrincipalID: principalID, Scopes: scopes, ExpiresAt: expires, CreatedAt: now, SecretHash: hash}
	if expires != nil {
		t := expires.UTC().Truncate(time.Millisecond)
		k.ExpiresAt = &t
	}
	if err := tx.KeyCreate(ctx, &k); err != nil {
		return nil, err
	}
	return &NewKey{Key: k, Secret: secret}, nil
}

// KeyPage is one page of keys, without secrets.
type KeyPage struct {
	Keys       []tessera.Key `json:"keys"`
	NextCursor string        `json:"next_cursor,omitempty"`
}

// ListKeys lists keys by id (admin).
func (s *Service) ListKeys(ctx context.Context, a *auth.Actor, cursor string, limit int) (*KeyPage, error) {
	a, after, limit, err := s.adminPage(ctx, a, ActKeyList, cursor, limit)
	if err != nil {
		return nil, err
	}
	page := &KeyPage{Keys: []tessera.Key{}}
	err = s.auditedRead(ctx, a, tessera.MainNamespace, ActKeyList, func(tx store.Tx, ev *tessera.AuditEvent) error {
		ev.Target = "keys"
		ks, err := tx.KeyList(ctx, after, limit+1)
		if len(ks) > limit {
			ks = ks[:limit]
			page.NextCursor = encodeCursor(ks[limit-1].ID)
		}
		page.Keys = append(page.Keys, ks...)
		return err
	})
	return page, err
}

// RevokeKey revokes a key (admin); every node stops accepting it at once.
func (s *Service) RevokeKey(ctx context.Context, a *auth.Actor, id string) error {
	a, err := s.authorize(ctx, a, "", ActKeyRevoke)
	if err != nil {
		return err
	}
	return s.audited(ctx, a, tessera.MainNamespace, ActKeyRevoke, func(tx store.Tx, ev *tessera.AuditEvent) error {
		ev.Target, ev.Status = id, 204
		// Every node stops accepting the key once this commits, not only
		// when its cache entry runs out.
		tx.Notify(ctx, keyTopic(id))
		return notFound(tx.KeyRevoke(ctx, id, ev.Time), "key", id)
	})
}

// NamespacePage is one page of namespaces, by name.
type NamespacePage struct {
	Namespaces []store.Namespace `json:"namespaces"`
	NextCursor string            `json:"next_cursor,omitempty"`
}

// ListNamespaces lists the namespaces that have been written to, by name
// (admin).
func (s *Service) ListNamespaces(ctx context.Context, a *auth.Actor, cursor string, limit int) (*NamespacePage, error) {
	a, after, limit, err := s.adminPage(ctx, a, ActNamespaceList, cursor, limit)
	if err != nil {
		return nil, err
	}
	page := &NamespacePage{Namespaces: []store.Namespace{}}
	err = s.auditedRead(ctx, a, tessera.MainNamespace, ActNamespaceList, func(tx store.Tx, ev *tessera.AuditEvent) error {
		ev.Target = "namespaces"
		ns, err := tx.NamespaceList(ctx, after, limit+1)
		if len(ns) > limit {
			ns = ns[:limit]
			page.NextCursor = encodeCursor(ns[limit-1].Name)
		}
		page.Namespaces = append(page.Namespaces, ns...)
		return err
	})
	return page, err
}

// StorageToday returns today's metered rows (admin).
func (s *Service) StorageToday(ctx context.Context, a *auth.Actor) (*meter.Totals, error) {
	a, err := s.authorize(ctx, a, "", ActStorage)
	if err != nil {
		return nil, err
	}
	var t meter.Totals
	err = s.auditedRead(ctx, a, tessera.MainNamespace, ActStorage, func(tx store.Tx, ev *tessera.AuditEvent) error {
		ev.Target = "storage"
		t = s.meter.Today()
		return nil
	})
	return &t, err
}

// SetAllowance is the operator-authorized change of the daily storage
// allowance (admin). It takes effect at once, even while the old allowance
// refuses writes: its audit event is written when storage accepts it, and
// counted when storage still refuses.
func (s *Service) SetAllowance(ctx context.Context, a *auth.Actor, allowance meter.Allowance) (*meter.Totals, error) {
	a, err := s.authorize(ctx, a, "", ActAllowance)
	if err != nil {
		return nil, err
	}
	if allowance.RowsWrittenPerDay < 0 {
		return nil, tessera.Invalid("rows_written_per_day", "rows_written_per_day is ≥ 0 (0 = unlimited)")
	}
	if allowance.RowsReadPerDay < 0 {
		return nil, tessera.Invalid("rows_read_per_day", "rows_read_per_day is ≥ 0 (0 = unlimited)")
	}
	if err := s.meter.SetAllowance(ctx, allowance); err != nil {
		return nil, err
	}
	err = s.audited(ctx, a, tessera.MainNamespace, ActAllowance, func(tx store.Tx, ev *tessera.AuditEvent) error {
		ev.Target = "storage"
		return nil
	})
	if tessera.ErrorCode(err) == tessera.CodeStorageQuotaExhausted {
		s.Count(a.Principal.ID, tessera.MainNamespace, ActAllowance, "ok")
	} else if err != nil {
		return nil, err
	}
	t := s.meter.Today()
	return &t, nil
}

// Me describes the caller's key and principal.
type Me struct {
	Principal tessera.Principal `json:"principal"`
	KeyID     string            `json:"key_id"`
	Scopes    []string          `json:"scopes"`
	ExpiresAt *time.Time        `json:"expires_at"`
	// LastUsedAt is approximate (SPEC §8).
	LastUsedAt *time.Time `json:"last_used_at"`
}

// WhoAmI answers GET /v1/me for any valid key.
func (s *Service) WhoAmI(ctx context.Context, a *auth.Actor) (*Me, error) {
	a, err := s.auth.Recheck(ctx, a)
	if err != nil {
		return nil, err
	}
	// Any valid key may ask, under any namespace's prefix: the event is
	// kept in main (a session's in its own namespace), so a key writes
	// nothing into a namespace it has no grant for (§4).
	err = s.auditedRead(ctx, a, homeNamespace(a), ActMe, func(tx store.Tx, ev *tessera.AuditEvent) error {
		ev.Target = a.Key.ID
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &Me{Principal: a.Principal, KeyID: a.Key.ID, Scopes: a.Key.Scopes, ExpiresAt: a.Key.ExpiresAt, LastUsedAt: a.Principal.LastUsedAt}, nil
}

// Bootstrap lets an operator in. With seed (a full key, from
// TESSERA_ADMIN_KEY) it makes sure exactly that admin key exists; without,
// it creates an admin principal and key on an empty store only. It returns
// the key it created ("" if none). A store that already has what it needs is
// only read. The check and the creation are one transaction: nodes started
// together on a fresh database with the same seed make the key once (the
// others' inserts wait for the first, find it made, and look again).
func Bootstrap(ctx context.Context, st store.Store, clock tessera.Clock, seed string) (string, error) {
	var seedID, seedSecret string
	if seed != "" {
		var err error
		if seedID, seedSecret, err = auth.ParseKey(seed); err != nil {
			return "", fmt.Errorf("TESSERA_ADMIN_KEY: %w", err)
		}
	}
	needed := func(tx store.Tx) (bool, error) {
		if seed == "" {
			any, err := tx.PrincipalAny(ctx)
			return !any, err
		}
		k, _, err := tx.KeyLookup(ctx, seedID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return true, nil
		case err == nil && subtle.ConstantTimeCompare(k.SecretHash, auth.HashSecret(seedSecret)) != 1:
			return false, fmt.Errorf("TESSERA_ADMIN_KEY: key %s exists with another secret", seedID)
		}
		return false, err
	}
	var need bool
	err := st.View(ctx, func(tx store.Tx) (err error) {
		need, err = needed(tx)
		return err
	})
	if err != nil || !need {
		return "", err
	}
	var created string
	err = st.Update(ctx, func(tx store.Tx) error {
		created = ""
		need, err := needed(tx)
		if err != nil || !need {
			return err
		}
		created, err = createAdmin(ctx, tx, clock.Now(), seed, "admin")
		if errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("the admin key was made meanwhile: %w", store.ErrRetry)
		}
		return err
	})
	if err != nil || seed != "" {
		return "", err
	}
	return created, nil
}

// CreateAdminKey creates a principal with an admin key, using seed as the
// key when given. It serves `tessera admin create-key`.
func CreateAdminKey(ctx context.Context, st store.Store, clock tessera.Clock, seed, displayName string) (string, error) {
	var key string
	err := st.Update(ctx, func(tx store.Tx) (err error) {
		key, err = createAdmin(ctx, tx, clock.Now(), seed, displayName)
		return err
	})
	return key, err
}

// createAdmin creates, inside tx, a principal with an admin key (seed,
// when given) and returns the key.
func createAdmin(ctx context.Context, tx store.Tx, now time.Time, seed, displayName string) (string, error) {
	p := &tessera.Principal{ID: ids.New(now), Kind: tessera.KindUser, DisplayName: displayName, CreatedAt: now}
	if err := tx.PrincipalCreate(ctx, p); err != nil {
		return "", err
	}
	if seed == "" {
		nk, err := createKey(ctx, tx, p.ID, []string{string(tessera.ActionAdmin)}, nil, now)
		if err != nil {
			return "", err
		}
		return nk.Secret, nil
	}
	id, secret, err := auth.ParseKey(seed)
	if err != nil {
		return "", err
	}
	return seed, tx.KeyCreate(ctx, &tessera.Key{ID: id, PrincipalID: p.ID, Scopes: []string{string(tessera.ActionAdmin)},
		CreatedAt: now, SecretHash: auth.HashSecret(secret)})
}
