package core

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// MaxIdempotencyKeyLen bounds an Idempotency-Key (SPEC §5).
const MaxIdempotencyKeyLen = 128

// ValidIdempotencyKey reports whether k is an acceptable key: 1–128
// printable ASCII characters.
func ValidIdempotencyKey(k string) bool {
	if k == "" || len(k) > MaxIdempotencyKeyLen {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// idempotent runs act inside tx unless the same principal already made this
// request on this route with this key. Of concurrent repeats exactly one
// acts: the entry is inserted first-wins (store.Tx.IdempotencyPut), and a
// loser's transaction runs again and finds the winner's answer. A repeat with the same request
// replays the stored result into out without acting, and reports true; a
// different request is idempotency_conflict. Only successes are
// remembered: a failed attempt rolls back with its transaction, so the
// client may retry it. On a replay the caller's audited action writes no
// event (nothing was done again): ev's action is cleared, and the replay
// is to be counted.
func idempotent(ctx context.Context, tx store.Tx, ev *tessera.AuditEvent, e store.Idempotency, req, out any, act func() error) (replayed bool, err error) {
	if e.Key == "" {
		return false, act()
	}
	reqJSON, err := json.Marshal(req)
	if err != nil {
		return false, fmt.Errorf("idempotency request: %w", err)
	}
	sum := sha256.Sum256(reqJSON)
	e.RequestHash = sum[:]
	prev, err := tx.IdempotencyGet(ctx, e.Namespace, e.PrincipalID, e.Route, e.Key)
	switch {
	case err == nil:
		if !bytes.Equal(prev.RequestHash, e.RequestHash) {
			return false, tessera.Errorf(tessera.CodeIdempotencyConflict, "this Idempotency-Key was used with a different request")
		}
		if ev != nil {
			ev.Action = ""
		}
		return true, json.Unmarshal(prev.Response, out)
	case !errors.Is(err, store.ErrNotFound):
		return false, fmt.Errorf("idempotency lookup: %w", err)
	}
	if err := act(); err != nil {
		return false, err
	}
	if e.Response, err = json.Marshal(out); err != nil {
		return false, fmt.Errorf("idempotency response: %w", err)
	}
	stored, err := tx.IdempotencyPut(ctx, &e)
	if err == nil && !stored {
		// A concurrent repeat with this key committed first: this
		// transaction's action must not stand. Run again, and replay
		// the winner's answer.
		return false, fmt.Errorf("idempotency key %q: %w", e.Key, store.ErrRetry)
	}
	return false, err
}

// countReplay counts an idempotent replay, which is no action.
func (s *Service) countReplay(replayed bool, a *auth.Actor, ns, action string) {
	if replayed {
		s.Count(a.Principal.ID, ns, action, OutcomeReplayed)
	}
}
