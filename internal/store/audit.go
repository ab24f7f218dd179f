package store

import (
	"context"

	"time"

	"github.com/tessera-dev/tessera/internal/tessera"
)

// AuditTx is the part of Tx that keeps the audit trail, its counters, the
// daily address salts, observational writes and their retention.
type AuditTx interface {
	AuditInsert(ctx context.Context, e *tessera.AuditEvent) error
	// AuditEvents returns events newest first, matching f.
	AuditEvents(ctx context.Context, f AuditFilter) ([]tessera.AuditEvent, error)
	// AuditCountersAdd adds each counter's count to its stored row.
	AuditCountersAdd(ctx context.Context, cs []tessera.AuditCounter) error
	// AuditCounters returns counters newest minute first, matching f.
	AuditCounters(ctx context.Context, f AuditFilter) ([]tessera.AuditCounter, error)

	// SaltGet returns the address salt of a UTC day; ErrNotFound if none.
	SaltGet(ctx context.Context, day string) ([]byte, error)
	// SaltPut stores a day's salt unless one exists, and returns the one
	// stored (so concurrent nodes agree).
	SaltPut(ctx context.Context, day string, salt []byte) ([]byte, error)

	IdentityGet(ctx context.Context, ns, principalID string) (*tessera.NamespaceIdentity, error)
	IdentityPut(ctx context.Context, id *tessera.NamespaceIdentity) error
	// PrincipalNamespaceAdd records that a principal acted or was counted
	// in ns, so audit reads by principal visit only its namespaces; adding
	// a pair that exists changes nothing.
	PrincipalNamespaceAdd(ctx context.Context, principalID, ns string) error
	// PrincipalTouch sets a principal's last_used_at.
	PrincipalTouch(ctx context.Context, id string, at time.Time) error

	// Retention: each deletes at most limit rows older than the cutoff
	// through an index, and reports how many it deleted.
	AuditEventsPurge(ctx context.Context, before time.Time, limit int) (int, error)
	AuditCountersPurge(ctx context.Context, before time.Time, limit int) (int, error)
	IdempotencyPurge(ctx context.Context, before time.Time, limit int) (int, error)
	SaltsPurge(ctx context.Context, beforeDay string) (int, error)
	// PrincipalsPurge deletes at most limit principals whose purge time is
	// before the cutoff, with their keys, namespace pairs and session
	// quotas.
	PrincipalsPurge(ctx context.Context, before time.Time, limit int) (int, error)
}

// AuditFilter selects audit rows. Since is required: reads never reach
// past the retention window. Without a namespace, a read by principal
// visits the namespaces recorded for it (PrincipalNamespaceAdd); a read
// without either visits every namespace.
type AuditFilter struct {
	Namespace   string
	PrincipalID string
	Action      string
	Outcome     string // counters: the outcome; events: "ok"
	Since       time.Time
	// Before is the id (events) or position (counters) the previous page
	// ended at.
	Before string
	Limit  int
}
