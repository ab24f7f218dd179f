package httpapi_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/tessera-dev/tessera/internal/httpapi"
)

// docs/api.md's route table has a row for every route of the API (under
// /v1, and the board and console pages), and no row for a route the
// server does not serve: the table is read by people choosing a call, so
// a route added without its row, or removed with its row left, fails here.
func TestAPIGuideListsEveryRoute(t *testing.T) {
	doc, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([A-Z]+ /[^`]*)` \\|").FindAllStringSubmatch(string(doc), -1) {
		rows[m[1]] = true
	}
	s := newTestServer(t)
	served := map[string]bool{}
	for _, p := range s.contract.next.(*httpapi.Server).Patterns() {
		method, path, ok := strings.Cut(p, " ")
		if !ok || strings.HasPrefix(path, "/ns/") {
			continue // the namespaced twin of a /v1 route, said once above the table
		}
		if !strings.HasPrefix(path, "/v1/") && path != "/board" && path != "/console" && path != "/healthz" {
			continue // discovery documents, MCP and metrics are listed beside the table
		}
		if path == "/v1/openapi.json" {
			continue
		}
		served[method+" "+path] = true
		if !rows[method+" "+path] {
			t.Errorf("docs/api.md has no row for %s %s", method, path)
		}
	}
	for r := range rows {
		if !served[r] {
			t.Errorf("docs/api.md has a row for %s, which the server does not serve", r)
		}
	}
}
