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

// Run runs the whole suite against stores made by open. Its groups run in
// parallel: every test opens a store of its own.
func Run(t *testing.T, open Opener) {
	for _, g := range []struct {
		name string
		test func(*testing.T, Opener)
	}{
		{"identity", testIdentity}, {"tasks", testTasks}, {"records", testRecords}, {"public", testPublic},
		{"audit", testAudit}, {"seam", testSeam}, {"sessions", testSessions}, {"deps", testDeps},
		{"console", testConsole}, {"retention", testRetention}, {"claim many", testClaimMany}, {"fleet", testFleet},
		{"gates", testGates},
	} {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			g.test(t, open)
		})
	}
}
