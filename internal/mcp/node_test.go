package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/tessera-dev/tessera/internal/ops"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// nodeDir holds the TypeScript clients' scripts and their pinned packages.
const nodeDir = "testdata/node"

// requireNode finds node and the installed packages; `make test` installs
// them (scripts/test-setup), and their absence fails the test with the
// command that installs them.
func requireNode(t *testing.T) string {
	t.Helper()
	const install = "run `npm ci --prefix internal/mcp/testdata/node` (as `make test` does)"
	node, err := exec.LookPath("node")
	missing := ""
	switch {
	case err != nil:
		missing = "node (20 or later) is not on PATH"
	case !exists(filepath.Join(nodeDir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")) ||
		!exists(filepath.Join(nodeDir, "node_modules", "@modelcontextprotocol", "client", "package.json")):
		missing = "the MCP client packages are not installed: " + install
	}
	if missing != "" {
		t.Fatal(missing)
	}
	return node
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// nodeReport is the line each script prints after its worker loop.
type nodeReport struct {
	Client          string   `json:"client"`
	ProtocolVersion string   `json:"protocolVersion"`
	Tools           int      `json:"tools"`
	Validated       []string `json:"validated"`
	Task            string   `json:"task"`
	State           string   `json:"state"`
}

// The official TypeScript clients run the worker loop against the real
// server: SDK v1 on its 2025 handshake, SDK v2 pinned to 2026-07-28. Each
// SDK validates every structured result against the tool's output schema
// inside callTool; the scripts check again with the SDK's validator.
func TestTypeScriptSDKWorkerLoop(t *testing.T) {
	node := requireNode(t)
	s := start(t)
	key := s.newKey("namespace:main", "read", "enqueue", "claim", "write")
	for _, tc := range []struct{ script, client, version string }{
		{"sdk-v1.mjs", "ts-sdk-v1", "2025-11-25"},
		{"sdk-v2.mjs", "ts-sdk-v2", "2026-07-28"},
	} {
		t.Run(tc.client, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, tc.script)
			cmd.Dir = nodeDir
			cmd.Env = append(os.Environ(), "TESSERA_MCP_URL="+s.URL+"/mcp", "TESSERA_KEY="+key, fmt.Sprintf("TESSERA_TOOLS=%d", len(ops.Tools())))
			out, err := cmd.Output()
			if err != nil {
				var stderr []byte
				if ee, ok := err.(*exec.ExitError); ok {
					stderr = ee.Stderr
				}
				t.Fatalf("%s: %v\nstdout: %s\nstderr: %s", tc.script, err, out, stderr)
			}
			t.Logf("%s printed: %s", tc.script, out)
			var r nodeReport
			if err := json.Unmarshal(out, &r); err != nil {
				t.Fatalf("%s printed no report: %s", tc.script, out)
			}
			want := []string{"enqueue_task", "claim_task", "heartbeat", "write_record", "submit_task", "claim_task", "heartbeat"}
			if r.Client != tc.client || r.ProtocolVersion != tc.version || r.Tools != len(ops.Tools()) || !slices.Equal(r.Validated, want) || r.State != "succeeded" || r.Task == "" {
				t.Fatalf("%s: %+v", tc.script, r)
			}
		})
	}
}
