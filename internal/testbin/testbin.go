// Package testbin finds the programs scripts/test-setup builds for the
// tests from the Go module proxy (SeaweedFS, Jaeger): each in the user's
// cache, under tessera-test/<name>-<version>/, unless an environment
// variable names another. And it deselects, for `make quick`, the tests
// that need what only scripts/test-setup provides.
package testbin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// QuickEnv, set (as `make quick` sets it), deselects the tests that need
// more than Go and a temporary directory: PostgreSQL, Chromium, node and
// the MCP clients' packages, promtool, SeaweedFS, Jaeger. `make test`
// never sets it, and there a missing one fails its tests.
const QuickEnv = "TESSERA_TEST_QUICK"

// Needs skips t when the quick loop deselects what it needs, named in
// what; otherwise it does nothing, and the test finds what it needs or
// fails saying how to get it.
func Needs(t testing.TB, what string) {
	t.Helper()
	if os.Getenv(QuickEnv) != "" {
		t.Skipf("needs %s: deselected by %s (make quick); make test runs it", what, QuickEnv)
	}
}

// Path is the program name at version, or what the variable env names.
func Path(env, name, version string) string {
	if b := os.Getenv(env); b != "" {
		return b
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	return filepath.Join(cache, "tessera-test", name+"-"+strings.TrimSpace(version), name)
}

// Tail is the last n bytes of b, for a program's log in a failed test.
func Tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
