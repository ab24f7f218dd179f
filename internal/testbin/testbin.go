// Package testbin finds the programs scripts/test-setup builds for the
// tests from the Go module proxy (SeaweedFS, Jaeger): each in the user's
// cache, under tessera-test/<name>-<version>/, unless an environment
// variable names another.
package testbin

import (
	"os"
	"path/filepath"
	"strings"
)

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
