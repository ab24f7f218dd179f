package core

import (
	"context"
	"fmt"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// purgeBatch bounds the rows one purge transaction deletes, so a purge of
// a large namespace holds the writer no longer than a batch at a time.
const purgeBatch = 500

// Purged is what a namespace purge removed.
type Purged struct {
	Namespace   string `json:"namespace"`
	RowsDeleted int    `json:"rows_deleted"`
}

// PurgeNamespace deletes a namespace's data (admin): its tasks with their
// runs, events and counts, records, buckets, blob metadata and bytes,
// uploads, settings and idempotency entries, in transactions of at most
// purgeBatch rows, then the namespace itself. The audit trail stays for its
// retention window, and the purge's own event is kept in main. The main
// namespace cannot be purged. A write that races the purge may survive
// it; purging again removes it.
func (s *Service) PurgeNamespace(ctx context.Context, a *auth.Actor, ns string) (*Purged, error) {
	a, err := s.authorize(ctx, a, "", ActNamespacePurge)
	if err != nil {
		return nil, err
	}
	if !tessera.ValidNamespace(ns) {
		return nil, tessera.Invalid("namespace", "namespace must match ^[a-z0-9][a-z0-9-]{0,62}$")
	}
	if ns == tessera.MainNamespace {
		return nil, tessera.Errorf(tessera.CodeInvalidState, "the main namespace cannot be purged")
	}
	out, err := s.purgeNamespace(ctx, ns)
	if err != nil {
		return nil, err
	}
	err = s.audited(ctx, a, tessera.MainNamespace, ActNamespacePurge, func(_ store.Tx, ev *tessera.AuditEvent) error {
		ev.Target = ns
		return nil
	})
	return out, err
}

// purgeNamespace deletes ns's data batch by batch, then its blob bytes.
func (s *Service) purgeNamespace(ctx context.Context, ns string) (*Purged, error) {
	out := &Purged{Namespace: ns}
	for {
		var n int
		err := s.store.Update(ctx, func(tx store.Tx) (err error) {
			n, err = tx.NamespacePurge(ctx, ns, purgeBatch)
			if err == nil && n == 0 {
				// The last batch took the namespace itself: every node
				// forgets it knew the namespace.
				tx.Notify(ctx, namespaceTopic(ns))
			}
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("purge %s after %d rows: %w", ns, out.RowsDeleted, err)
		}
		if n == 0 {
			break
		}
		out.RowsDeleted += n
	}
	if b := s.blob.bytes; b != nil {
		if err := b.RemoveNamespace(ctx, ns); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// forgetNamespace drops what this process remembers of ns: after a purge
// the next write must record the namespace again.
func (s *Service) forgetNamespace(ns string) {
	s.nsMu.Lock()
	delete(s.known, ns)
	s.nsMu.Unlock()
	s.StateChanged(ns)
}
