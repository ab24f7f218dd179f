package ops

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/input"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// The formats the input checks and the API description share accept
// exactly what the checks written apart from them accept (a scope is
// parsed, a blob hash is read by the byte store), on strings built around
// their edges.
func TestDocumentedPatternsMatchTheChecks(t *testing.T) {
	checks := []struct {
		name    string
		pattern string
		check   func(string) bool
	}{
		{"namespaces", input.NamespaceFormat.Pattern, tessera.ValidNamespace},
		{"scopes", input.ScopeFormat.Pattern, tessera.ValidScope},
		{"blob hashes", input.SHA256Format.Pattern, func(s string) bool { _, err := core.ParseSum("sha256", s); return err == nil }},
		{"idempotency keys", IdempotencyKeyFormat.Pattern, core.ValidIdempotencyKey},
	}
	pieces := []string{"a", "Z", "0", "9", "f", "F", "g", "-", "_", ".", ":", "=", "@", "/", " ", "é", "*", "\n",
		"sha256:", "SHA256:", "namespace:", "admin", "read", "write", "..", strings.Repeat("a", 62), strings.Repeat("b", 63),
		strings.Repeat("0", 64), strings.Repeat("c", 255)}
	rng := rand.New(rand.NewPCG(1, 2))
	samples := []string{"", "default", "namespace:*", "namespace:main", "sha256:" + strings.Repeat("ab", 32), strings.Repeat("k", 256), strings.Repeat("k", 257)}
	for range 20000 {
		var b strings.Builder
		for range rng.IntN(6) + 1 {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		samples = append(samples, b.String())
	}
	for _, c := range checks {
		re := regexp.MustCompile(c.pattern)
		accepted := 0
		for _, s := range samples {
			if re.MatchString(s) != c.check(s) {
				t.Errorf("%s: the pattern %s says %v for %q, the check %v", c.name, c.pattern, re.MatchString(s), s, c.check(s))
			}
			if c.check(s) {
				accepted++
			}
		}
		if accepted == 0 {
			t.Errorf("%s: no sample accepted; the comparison proves nothing", c.name)
		}
	}
}
