package httpapi

import "testing"

// Every route names its operation, so its failures are counted under the
// same action as its successes are audited; no two routes share a pattern.
func TestRouteTableIsComplete(t *testing.T) {
	s := &Server{}
	seen := map[string]bool{}
	for _, rt := range append(s.routes(), s.publicRoutes()...) {
		key := rt.method + " " + rt.path
		if rt.op == "" || rt.summary == "" || rt.handle == nil {
			t.Errorf("%s: op %q, summary %q, handler set %v", key, rt.op, rt.summary, rt.handle != nil)
		}
		if seen[key] {
			t.Errorf("%s registered twice", key)
		}
		seen[key] = true
	}
	if len(seen) < 40 {
		t.Errorf("only %d routes", len(seen))
	}
}
