package core

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"

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
// request on this route with this key. A repeat with the same request
// replays the stored result into out without acting; a different request is
// idempotency_conflict. Only successes are remembered: a failed attempt
// rolls back with its transaction, so the client may retry it.
func idempotent(tx store.Tx, e store.Idempotency, req, out any, act func() error) error {
	if e.Key == "" {
		return act()
	}
	reqJSON, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("idempotency request: %w", err)
	}
	sum := sha256.Sum256(reqJSON)
	e.RequestHash = sum[:]
	prev, err := tx.IdempotencyGet(e.Namespace, e.PrincipalID, e.Route, e.Key)
	switch {
	case err == nil:
		if !bytes.Equal(prev.RequestHash, e.RequestHash) {
			return tessera.Errorf(tessera.CodeIdempotencyConflict, "this Idempotency-Key was used with a different request")
		}
		return json.Unmarshal(prev.Response, out)
	case !errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("idempotency lookup: %w", err)
	}
	if err := act(); err != nil {
		return err
	}
	if e.Response, err = json.Marshal(out); err != nil {
		return fmt.Errorf("idempotency response: %w", err)
	}
	return tx.IdempotencyPut(&e)
}
