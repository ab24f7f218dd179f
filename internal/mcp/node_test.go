package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/tessera-dev/tessera/internal/ops"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
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

// The tasks extension's own requester (@modelcontextprotocol/ext-tasks)
// hands work off with run_task and polls the handle until a worker here
// submits; it then cancels a second one, which the server shows
// cancelled.
func TestExtTasksRequester(t *testing.T) {
	node := requireNode(t)
	if !exists(filepath.Join(nodeDir, "node_modules", "@modelcontextprotocol", "ext-tasks", "package.json")) {
		t.Fatal("@modelcontextprotocol/ext-tasks is not installed: run `npm ci --prefix internal/mcp/testdata/node` (as `make test` does)")
	}
	s := start(t)
	key := s.newKey("namespace:main", "read", "enqueue")
	worker := s.newKey("namespace:main", "claim")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "tasks.mjs")
	cmd.Dir = nodeDir
	cmd.Env = append(os.Environ(), "TESSERA_MCP_URL="+s.URL+"/mcp", "TESSERA_KEY="+key)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The worker: claim the handed-off task when it is there, submit.
	var c map[string]any
	for c == nil || c["lease"] == nil {
		if ctx.Err() != nil {
			t.Fatalf("no task to claim; tasks.mjs: %s %s", stdout.Bytes(), stderr.Bytes())
		}
		c = s.must(worker, "claim_task", map[string]any{"queue": "ext", "wait_seconds": 1})
	}
	task := c["task"].(map[string]any)
	s.must(worker, "submit_task", map[string]any{"task_id": task["id"], "lease_token": c["lease"].(map[string]any)["token"],
		"outcome": "succeeded", "result": map[string]any{"pages": 3}})
	if err := cmd.Wait(); err != nil {
		t.Fatalf("tasks.mjs: %v\nstdout: %s\nstderr: %s", err, stdout.Bytes(), stderr.Bytes())
	}
	t.Logf("tasks.mjs printed: %s", stdout.Bytes())
	lines := bytes.Split(bytes.TrimSpace(stdout.Bytes()), []byte("\n"))
	var worked struct {
		Kind    string `json:"kind"`
		TaskID  string `json:"taskId"`
		Outcome struct {
			Status string `json:"status"`
			Result struct {
				StructuredContent map[string]any `json:"structuredContent"`
				IsError           bool           `json:"isError"`
			} `json:"result"`
		} `json:"outcome"`
	}
	var cancelled struct {
		Kind   string `json:"kind"`
		TaskID string `json:"taskId"`
		Status string `json:"status"`
	}
	if len(lines) != 2 || json.Unmarshal(lines[0], &worked) != nil || json.Unmarshal(lines[1], &cancelled) != nil {
		t.Fatalf("tasks.mjs printed %s", stdout.Bytes())
	}
	if worked.Kind != "task" || worked.TaskID != "main:"+task["id"].(string) || worked.Outcome.Status != "completed" ||
		worked.Outcome.Result.IsError || worked.Outcome.Result.StructuredContent["pages"] != float64(3) {
		t.Fatalf("the handed-off task: %+v", worked)
	}
	id, _ := strings.CutPrefix(cancelled.TaskID, "main:")
	if cancelled.Kind != "task" || cancelled.Status != "cancelled" || s.must(key, "get_task", map[string]any{"task_id": id})["state"] != "canceled" {
		t.Fatalf("the cancelled task: %+v", cancelled)
	}
}
