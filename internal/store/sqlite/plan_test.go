package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// Every retention and audit-read statement walks an index: EXPLAIN QUERY
// PLAN of each shows no full scan of a table (SPEC §9). The statements are
// captured as the store runs them, so a rewrite cannot slip past the test.
func TestRetentionAndAuditReadsUseIndexes(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "t.db"), meter.New(tessera.SystemClock{}))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Now().UTC()
	err = db.Update(ctx, func(tx store.Tx) error {
		for i, ns := range []string{"main", "alpha", "beta"} {
			ev := &tessera.AuditEvent{ID: tessera.NewID(now), Time: now, Namespace: ns, PrincipalID: "p" + string(rune('0'+i)),
				KeyID: "k", Action: "task.get", Target: "t", Status: 200}
			if err := tx.AuditInsert(ctx, ev); err != nil {
				return err
			}
		}
		return tx.AuditCountersAdd(ctx, []tessera.AuditCounter{{Minute: now, Namespace: "main", PrincipalID: "p0", Action: "claim.grant", Outcome: "empty", Count: 1}})
	})
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var seen []string
	traceSQL = func(sql string) {
		mu.Lock()
		seen = append(seen, sql)
		mu.Unlock()
	}
	defer func() { traceSQL = nil }()

	since := now.Add(-24 * time.Hour)
	filters := []store.AuditFilter{
		{Since: since, Limit: 10},                                 // admin, everything
		{Since: since, Limit: 10, Namespace: "alpha"},             // admin, one namespace
		{Since: since, Limit: 10, PrincipalID: "p1"},              // own audit
		{Since: since, Limit: 10, Namespace: "main", Action: "x"}, // filtered
		{Since: since, Limit: 10, Before: tessera.IDFloor(now), PrincipalID: "p0", Outcome: "empty"},
	}
	err = db.Update(ctx, func(tx store.Tx) error {
		for _, f := range filters {
			if _, err := tx.AuditEvents(ctx, f); err != nil {
				return err
			}
			if _, err := tx.AuditCounters(ctx, f); err != nil {
				return err
			}
		}
		cutoff := now.Add(-time.Hour)
		if _, err := tx.AuditEventsPurge(ctx, cutoff, 500); err != nil {
			return err
		}
		if _, err := tx.AuditCountersPurge(ctx, cutoff, 500); err != nil {
			return err
		}
		if _, err := tx.IdempotencyPurge(ctx, cutoff, 500); err != nil {
			return err
		}
		if _, err := tx.SaltsPurge(ctx, "2000-01-01"); err != nil {
			return err
		}
		_, err := tx.PrincipalsPurge(ctx, cutoff, 500)
		return err
	})
	traceSQL = nil
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) < 14 {
		t.Fatalf("captured %d statements, want every read and purge", len(seen))
	}
	for _, sql := range seen {
		var plan []string
		err := db.View(ctx, func(st store.Tx) error {
			return st.(*tx).c.query(context.Background(), "EXPLAIN QUERY PLAN "+sql, placeholders(sql), func(s *sqlite3.Stmt) error {
				plan = append(plan, s.ColumnText(3))
				return nil
			})
		})
		if err != nil {
			t.Fatalf("explain %q: %v", sql, err)
		}
		for _, step := range plan {
			// "SCAN ns" walks the recursive namespace list, not a table;
			// "SCAN t USING INDEX" or "USING PRIMARY KEY" are index walks.
			if strings.HasPrefix(step, "SCAN ") && !strings.Contains(step, "USING") && !strings.HasPrefix(step, "SCAN ns") &&
				!strings.Contains(step, "CONSTANT ROW") {
				t.Errorf("full scan %q in plan of:\n%s\nplan: %v", step, sql, plan)
			}
		}
	}
}

// placeholders gives each ? of sql a NULL, enough to plan it.
func placeholders(sql string) []any {
	return make([]any, strings.Count(sql, "?"))
}
