package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/ops"
	"github.com/tessera-dev/tessera/internal/testbin"
)

// nodeDir holds the TypeScript clients' scripts and their pinned packages.
const nodeDir = "testdata/node"

// requireNode finds node and the installed packages; `make test` installs
// them (scripts/test-setup), and their absence fails the test with the
// command that installs them.
func requireNode(t *testing.T) string {
	t.Helper()
	testbin.Needs(t, "node and the MCP clients' packages")
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
// cancelled. A third one's worker opens a form gate: the library shows
// the requester input_required, hands the elicitation to its input
// handler, and sends the handler's answer as tasks/update; the worker's
// next claim carries that answer, and its result reaches the requester.
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
	// The buffers are read only once the script has exited.
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	ended := func(err error) {
		t.Helper()
		t.Fatalf("tasks.mjs ended early (%v)\nstdout: %s\nstderr: %s", err, stdout.Bytes(), stderr.Bytes())
	}
	// claim claims a task from queue once there is one, as the worker.
	claim := func(queue string) (map[string]any, map[string]any, string) {
		t.Helper()
		for {
			select {
			case err := <-exited:
				ended(err)
			default:
			}
			if ctx.Err() != nil {
				cancel()
				ended(<-exited)
			}
			c := s.must(worker, "claim_task", map[string]any{"queue": queue, "wait_seconds": 1})
			if c["lease"] != nil {
				return c, c["task"].(map[string]any), c["lease"].(map[string]any)["token"].(string)
			}
		}
	}

	// The worker: claim the handed-off task when it is there, submit.
	_, task, lease := claim("ext")
	s.must(worker, "submit_task", map[string]any{"task_id": task["id"], "lease_token": lease,
		"outcome": "succeeded", "result": map[string]any{"pages": 3}})

	// The gated one: the worker asks, and waits for the answer.
	_, gated, lease := claim("ext-gate")
	schema := map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}, "required": []string{"ok"}}
	if o := s.must(worker, "open_gate", map[string]any{"task_id": gated["id"], "lease_token": lease,
		"key": "approve", "message": "Ship the release?", "schema": schema}); o["state"] != "gated" {
		t.Fatalf("open_gate: %v", o)
	}
	again, task2, lease := claim("ext-gate")
	if task2["id"] != gated["id"] {
		t.Fatalf("claimed %v after the gate, want %v", task2["id"], gated["id"])
	}
	answers, _ := json.Marshal(again["gate_answers"])
	want := `{"approve":{"action":"accept","content":{"ok":true},"answered_by":"` + gated["created_by"].(string) + `","at":"2026-03-02T10:00:00Z"}}`
	if !jsonEqual(string(answers), want) {
		t.Fatalf("the claim after the gate carries gate_answers %s, want %s", answers, want)
	}
	s.must(worker, "submit_task", map[string]any{"task_id": gated["id"], "lease_token": lease,
		"outcome": "succeeded", "result": map[string]any{"shipped": true}})

	if err := <-exited; err != nil {
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
	var approved struct {
		Kind   string `json:"kind"`
		TaskID string `json:"taskId"`
		Seen   []struct {
			Status        string          `json:"status"`
			StatusMessage string          `json:"statusMessage"`
			InputRequests json.RawMessage `json:"inputRequests"`
		} `json:"seen"`
		Asked   []json.RawMessage `json:"asked"`
		Errors  []string          `json:"errors"`
		Outcome struct {
			Status string `json:"status"`
			Result struct {
				StructuredContent json.RawMessage `json:"structuredContent"`
				IsError           bool            `json:"isError"`
			} `json:"result"`
		} `json:"outcome"`
		Error string `json:"error"`
	}
	if len(lines) != 3 || json.Unmarshal(lines[0], &worked) != nil || json.Unmarshal(lines[1], &cancelled) != nil || json.Unmarshal(lines[2], &approved) != nil {
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

	// The gated task, as the requester saw it: working while no gate was
	// open (how often the poll caught it there is timing), input_required
	// once, showing the gate, then its result.
	handle := "main:" + gated["id"].(string)
	if approved.Kind != "task" || approved.TaskID != handle || approved.Error != "" || len(approved.Errors) != 0 {
		t.Fatalf("the gated task: %s", lines[2])
	}
	var shown []string
	var gateShown json.RawMessage
	for _, v := range approved.Seen {
		if v.Status == "working" && v.InputRequests == nil {
			continue
		}
		shown = append(shown, v.Status+": "+v.StatusMessage)
		if v.Status == "input_required" {
			gateShown = v.InputRequests
		}
	}
	request := `{"mode":"form","message":"Ship the release?","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}}`
	if !slices.Equal(shown, []string{"input_required: gated: waiting for 1 answer(s)", "completed: succeeded"}) ||
		!jsonEqual(string(gateShown), `{"approve":{"method":"elicitation/create","params":`+request+`}}`) {
		t.Fatalf("the requester saw %q, the gate as %s", shown, gateShown)
	}
	// The library's input handler was asked once, for the gate's key, with
	// the elicitation's params (and the related-task _meta
	// createApplicationInputHandler adds).
	asked := `{"kind":"elicitation","params":{"mode":"form","message":"Ship the release?","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]},` +
		`"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"` + handle + `"}}},` +
		`"context":{"scope":"task","delivery":"task-update","taskId":"` + handle + `","inputId":"approve"}}`
	if len(approved.Asked) != 1 || !jsonEqual(string(approved.Asked[0]), asked) {
		t.Fatalf("the input handler was asked %s, want once: %s", approved.Asked, asked)
	}
	if approved.Outcome.Status != "completed" || approved.Outcome.Result.IsError || !jsonEqual(string(approved.Outcome.Result.StructuredContent), `{"shipped":true}`) {
		t.Fatalf("the gated task's outcome: %s", lines[2])
	}
	if st := s.must(key, "get_task", map[string]any{"task_id": gated["id"]})["state"]; st != "succeeded" {
		t.Fatalf("the gated task is %v", st)
	}
}
