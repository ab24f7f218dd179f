// Package auth owns API keys: their format (tsk_<id>_<secret>), how secrets
// are hashed and compared, and resolving a bearer key to an Actor with a
// short-lived cache (SPEC §4: at most 5 s, dropped at once on the node that
// revokes).
package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// MaxKeyLen bounds what ParseKey will look at: "tsk_" + 32 + "_" + 64.
const MaxKeyLen = 4 + 32 + 1 + 64

// ParseKey splits a key "tsk_<id>_<secret>" with id [a-z0-9]{4,32} and
// secret [A-Za-z0-9]{24,64}.
func ParseKey(key string) (id, secret string, err error) {
	if len(key) > MaxKeyLen {
		return "", "", errors.New("key too long")
	}
	rest, ok := strings.CutPrefix(key, "tsk_")
	if !ok {
		return "", "", errors.New("key must start with tsk_")
	}
	id, secret, ok = strings.Cut(rest, "_")
	if !ok {
		return "", "", errors.New("key must be tsk_<id>_<secret>")
	}
	if len(id) < 4 || len(id) > 32 || !only(id, false) {
		return "", "", errors.New("key id must be 4-32 characters of [a-z0-9]")
	}
	if len(secret) < 24 || len(secret) > 64 || !only(secret, true) {
		return "", "", errors.New("key secret must be 24-64 characters of [A-Za-z0-9]")
	}
	return id, secret, nil
}

func only(s string, upper bool) bool {
	for _, r := range []byte(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
		case upper && r >= 'A' && r <= 'Z':
		default:
			return false
		}
	}
	return true
}

// HashSecret is what the store keeps of a secret. Secrets are long and
// random, so a fast hash is as strong as a slow one here and keeps the
// authentication path cheap.
func HashSecret(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// NewKey makes a fresh key: the full bearer string, its id and secret hash.
func NewKey() (key, id string, hash []byte) {
	id = tessera.RandomAlnum(16, false)
	secret := tessera.RandomAlnum(40, true)
	return "tsk_" + id + "_" + secret, id, HashSecret(secret)
}

// Actor is an authenticated caller.
type Actor struct {
	Key       tessera.Key
	Principal tessera.Principal
}

// Scopes returns the actor's key scopes.
func (a *Actor) Scopes() tessera.Scopes { return tessera.Scopes(a.Key.Scopes) }

// Check is the full authorization check of §4: grant for ns, then action.
func (a *Actor) Check(ns string, action tessera.Action) error {
	s := a.Scopes()
	if action == tessera.ActionAdmin {
		if !s.Admin() {
			return tessera.Errorf(tessera.CodeForbidden, "this key lacks the admin scope")
		}
		return nil
	}
	if !s.GrantsNamespace(ns) {
		return tessera.Errorf(tessera.CodeForbidden, "this key has no grant for namespace %q%s", ns, grantHint(s))
	}
	if action != "" && !s.Allows(action) {
		return tessera.Errorf(tessera.CodeForbidden, "this key lacks the %s scope", action)
	}
	return nil
}

// grantHint says which namespaces a key can use, for the refusal of one it
// cannot: a session key calling without a namespace meets main, and the
// answer should tell it where to go.
func grantHint(s tessera.Scopes) string {
	var granted []string
	for _, sc := range s {
		if ns, ok := strings.CutPrefix(sc, "namespace:"); ok {
			granted = append(granted, fmt.Sprintf("%q", ns))
		}
	}
	switch len(granted) {
	case 0:
		return "; it has no namespace grant at all"
	case 1:
		return "; it can use namespace " + granted[0] + " (over HTTP under /ns/" + strings.Trim(granted[0], `"`) + "/, over MCP as the namespace argument)"
	}
	return "; it can use namespaces " + strings.Join(granted, ", ")
}

// What a 401 says of the credentials sent. Each says what to do; none
// tells an unknown key from an expired or revoked one
// (tessera.ErrUnauthorized), so a 401 is no oracle for which keys exist.
var (
	errNoKey = &tessera.Error{Code: tessera.CodeUnauthorized,
		Message: "a key is required: send it as the header Authorization: Bearer tsk_<id>_<secret>"}
	errAPIKeyHeader = &tessera.Error{Code: tessera.CodeUnauthorized,
		Message: "send the key as Authorization: Bearer <key>, not in X-Api-Key"}
	errNoScheme = &tessera.Error{Code: tessera.CodeUnauthorized,
		Message: "the Authorization header holds the key without its scheme: send Authorization: Bearer <key>"}
	errScheme = &tessera.Error{Code: tessera.CodeUnauthorized,
		Message: "the Authorization scheme must be Bearer: send Authorization: Bearer tsk_<id>_<secret>"}
	errNotAKey = &tessera.Error{Code: tessera.CodeUnauthorized,
		Message: "the bearer token is not a Tessera key: a key looks like tsk_<id>_<secret>"}
)

// Bearer reads the key a request carries in its Authorization header
// (apiKey is its X-Api-Key header, which clients of other APIs send), or
// says what is wrong with what it carries. The scheme is
// case-insensitive (RFC 7235 §2.1): "bearer" is Bearer.
func Bearer(authorization, apiKey string) (string, error) {
	if authorization == "" {
		if apiKey != "" {
			return "", errAPIKeyHeader
		}
		return "", errNoKey
	}
	scheme, token, _ := strings.Cut(authorization, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		if _, _, err := ParseKey(strings.TrimSpace(authorization)); err == nil {
			return "", errNoScheme
		}
		return "", errScheme
	}
	return strings.TrimSpace(token), nil
}

// Authenticator resolves keys, caching each resolution briefly.
type Authenticator struct {
	store store.Store
	clock tessera.Clock
	ttl   time.Duration

	mu    sync.Mutex
	cache map[string]cached
	// forgets counts ForgetKey and ForgetPrincipal calls: a lookup that
	// began before one may have read the old row, and is not cached.
	forgets uint64
}

type cached struct {
	key       tessera.Key
	principal tessera.Principal
	at        time.Time
}

// maxCached bounds the cache; past it, stale entries are dropped first and
// then the whole cache if every entry is fresh (a burst of distinct keys).
const maxCached = 10000

// NewAuthenticator returns an Authenticator caching resolutions for ttl.
func NewAuthenticator(s store.Store, clock tessera.Clock, ttl time.Duration) *Authenticator {
	return &Authenticator{store: s, clock: clock, ttl: ttl, cache: map[string]cached{}}
}

// Authenticate resolves a bearer key. Every failure is the same
// ErrUnauthorized; only storage faults differ.
func (a *Authenticator) Authenticate(ctx context.Context, bearer string) (*Actor, error) {
	id, secret, err := ParseKey(bearer)
	if err != nil {
		return nil, errNotAKey
	}
	k, p, err := a.resolve(ctx, id)
	if err != nil {
		return nil, err
	}
	if subtle.ConstantTimeCompare(HashSecret(secret), k.SecretHash) != 1 || !k.Live(a.clock.Now()) {
		return nil, tessera.ErrUnauthorized
	}
	return &Actor{Key: *k, Principal: *p}, nil
}

// Recheck resolves the actor's key again, as §4 asks right before an
// operation and after any wait: a revoked or expired key fails with 401.
func (a *Authenticator) Recheck(ctx context.Context, actor *Actor) (*Actor, error) {
	k, p, err := a.resolve(ctx, actor.Key.ID)
	if err != nil {
		return nil, err
	}
	if subtle.ConstantTimeCompare(actor.Key.SecretHash, k.SecretHash) != 1 || !k.Live(a.clock.Now()) {
		return nil, tessera.ErrUnauthorized
	}
	return &Actor{Key: *k, Principal: *p}, nil
}

func (a *Authenticator) resolve(ctx context.Context, id string) (*tessera.Key, *tessera.Principal, error) {
	now := a.clock.Now()
	a.mu.Lock()
	c, ok := a.cache[id]
	forgets := a.forgets
	a.mu.Unlock()
	if ok && now.Sub(c.at) < a.ttl && !now.Before(c.at) {
		return &c.key, &c.principal, nil
	}
	var (
		k *tessera.Key
		p *tessera.Principal
	)
	err := a.store.View(ctx, func(tx store.Tx) (err error) {
		k, p, err = tx.KeyLookup(ctx, id)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, tessera.ErrUnauthorized
	}
	if err != nil {
		return nil, nil, fmt.Errorf("look up key %s: %w", id, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.forgets != forgets {
		// A revocation or principal change landed while this lookup ran:
		// the row read may predate it, so it answers this request only.
		return k, p, nil
	}
	if len(a.cache) >= maxCached {
		for cid, c := range a.cache {
			if now.Sub(c.at) >= a.ttl {
				delete(a.cache, cid)
			}
		}
		if len(a.cache) >= maxCached {
			clear(a.cache)
		}
	}
	a.cache[id] = cached{key: *k, principal: *p, at: now}
	return k, p, nil
}

// ForgetKey drops a cached key, so a revocation is seen at once here.
func (a *Authenticator) ForgetKey(id string) {
	a.mu.Lock()
	a.forgets++
	delete(a.cache, id)
	a.mu.Unlock()
}

// Touched records a principal's new last_used_at in the cached keys, so
// the next request inside the cache window does not think it stale.
func (a *Authenticator) Touched(principalID string, at time.Time) {
	a.mu.Lock()
	for kid, c := range a.cache {
		if c.principal.ID == principalID {
			c.principal.LastUsedAt = &at
			a.cache[kid] = c
		}
	}
	a.mu.Unlock()
}

// ForgetAll drops every cached key: after a stretch in which revocations
// elsewhere may have gone unheard.
func (a *Authenticator) ForgetAll() {
	a.mu.Lock()
	a.forgets++
	clear(a.cache)
	a.mu.Unlock()
}

// ForgetPrincipal drops every cached key of a principal, so a change of its
// kind or account is seen by the next request.
func (a *Authenticator) ForgetPrincipal(id string) {
	a.mu.Lock()
	a.forgets++
	for kid, c := range a.cache {
		if c.principal.ID == id {
			delete(a.cache, kid)
		}
	}
	a.mu.Unlock()
}
