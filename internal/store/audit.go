package store

import (
	"time"

	"github.com/tessera-dev/tessera/internal/tessera"
)

// AuditTx is the part of Tx that keeps the audit trail, its counters, the
// daily address salts, observational writes and their retention.
type AuditTx interface {
	AuditInsert(e *tessera.AuditEvent) error
	// AuditEvents returns events newest first, matching f.
	AuditEvents(f AuditFilter) ([]tessera.AuditEvent, error)
	// AuditCountersAdd adds each counter's count to its stored row.
	AuditCountersAdd(cs []tessera.AuditCounter) error
	// AuditCounters returns counters newest minute first, matching f.
	AuditCounters(f AuditFilter) ([]tessera.AuditCounter, error)

	// SaltGet returns the address salt of a UTC day; ErrNotFound if none.
	SaltGet(day string) ([]byte, error)
	// SaltPut stores a day's salt unless one exists, and returns the one
	// stored (so concurrent nodes agree).
	SaltPut(day string, salt []byte) ([]byte, error)

	IdentityGet(ns, principalID string) (*tessera.NamespaceIdentity, error)
	IdentityPut(id *tessera.NamespaceIdentity) error
	// PrincipalTouch sets a principal's last_used_at.
	PrincipalTouch(id string, at time.Time) error

	// Retention: each deletes at most limit rows older than the cutoff
	// through an index, and reports how many it deleted.
	AuditEventsPurge(before time.Time, limit int) (int, error)
	AuditCountersPurge(before time.Time, limit int) (int, error)
	IdempotencyPurge(before time.Time, limit int) (int, error)
	SaltsPurge(beforeDay string) (int, error)
	// PrincipalsPurge deletes principals whose purge time is before the
	// cutoff, with their keys.
	PrincipalsPurge(before time.Time, limit int) (int, error)
}

// AuditFilter selects audit rows. Since is required: reads never reach
// past the retention window.
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
