package main

import (
	"strings"
	"testing"

	"github.com/tessera-dev/tessera/internal/store/postgres/pgtest"
)

// Every admin command works on the store in use: TESSERA_STORE (or
// --store) names a PostgreSQL schema as for serve. A schema holding no
// store is refused, not made; once a node made it, a key made offline
// gets in through any node.
func TestAdminCreateKeyOnPostgres(t *testing.T) {
	url := pgtest.Schema(t)
	bin := buildTessera(t)
	dir := t.TempDir()
	if key, err := createKey(t, bin, dir, "TESSERA_STORE="+url); err == nil || !strings.Contains(err.Error(), "holds no Tessera store") {
		t.Fatalf("create-key on an empty schema: %q, %v; want a refusal naming it", key, err)
	}
	nodes := startNodes(t, bin, url, 1)
	key, err := createKey(t, bin, dir, "TESSERA_STORE="+url)
	if err != nil {
		t.Fatal(err)
	}
	nodes[0].must(200, "GET", "/v1/admin/namespaces", key, nil, nil)
}
