// Package storetest is the conformance suite every store backend must pass:
// the same behaviour, tested through the store interface alone, so a second
// backend stays honest.
package storetest

import (
	"testing"

	"github.com/tessera-dev/tessera/internal/store"
)

// Opener returns a fresh, empty store for one test; the backend's test
// closes it in t.Cleanup.
type Opener func(t *testing.T) store.Store

// Run runs the whole suite against stores made by open.
func Run(t *testing.T, open Opener) {
	t.Run("identity", func(t *testing.T) { testIdentity(t, open) })
	t.Run("tasks", func(t *testing.T) { testTasks(t, open) })
	t.Run("records", func(t *testing.T) { testRecords(t, open) })
	t.Run("public", func(t *testing.T) { testPublic(t, open) })
	t.Run("audit", func(t *testing.T) { testAudit(t, open) })
	t.Run("seam", func(t *testing.T) { testSeam(t, open) })
	t.Run("sessions", func(t *testing.T) { testSessions(t, open) })
	t.Run("deps", func(t *testing.T) { testDeps(t, open) })
	t.Run("console", func(t *testing.T) { testConsole(t, open) })
	t.Run("retention", func(t *testing.T) { testRetention(t, open) })
	t.Run("claim many", func(t *testing.T) { testClaimMany(t, open) })
	t.Run("fleet", func(t *testing.T) { testFleet(t, open) })
	t.Run("gates", func(t *testing.T) { testGates(t, open) })
}
