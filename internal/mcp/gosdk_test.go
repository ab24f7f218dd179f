package mcp_test

import (
	"context"
	"encoding/json"
	"github.com/tessera-dev/tessera/internal/ops"
	"net/http"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// bearer adds a Tessera key to every request, as a deployment's HTTP
// client would.
type bearer struct{ key string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

// The official Go SDK client runs a whole worker loop against the real
// server, once on the stateless 2026-07-28 revision (server/discover, no
// handshake) and once on the 2025-06-18 handshake. The Go client does not
// validate structured results itself, so each one is validated here with
// the SDK's own JSON Schema library against the tool's output schema.
func TestGoSDKWorkerLoop(t *testing.T) {
	for _, version := range []string{"2026-07-28", "2025-06-18"} {
		t.Run(version, func(t *testing.T) {
			s := start(t)
			key := s.newKey("namespace:main", "read", "enqueue", "claim", "write")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			client := sdk.NewClient(&sdk.Implementation{Name: "tessera-go-interop", Version: "1.0.0"}, nil)
			transport := &sdk.StreamableClientTransport{Endpoint: s.URL + "/mcp",
				HTTPClient: &http.Client{Transport: bearer{key}}, DisableStandaloneSSE: true}
			cs, err := client.Connect(ctx, transport, &sdk.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer cs.Close()
			init := cs.InitializeResult()
			if init.ProtocolVersion != version || init.ServerInfo == nil || init.ServerInfo.Name != "tessera" || init.Instructions == "" {
				t.Fatalf("connected on %q as %+v", init.ProtocolVersion, init)
			}
			w := &goWorker{t: t, ctx: ctx, cs: cs, schemas: map[string]*jsonschema.Resolved{}}
			w.listTools()

			task := w.call("enqueue_task", map[string]any{"title": "interop task", "payload": map[string]any{"n": 7}})
			claim := w.call("claim_task", map[string]any{"lease_seconds": 60})
			lease := claim["lease"].(map[string]any)
			if lease["task_id"] != task["id"] {
				t.Fatalf("claimed %v, enqueued %v", lease["task_id"], task["id"])
			}
			token := lease["token"].(string)
			hb := w.call("heartbeat", map[string]any{"task_id": task["id"], "lease_token": token, "progress": map[string]any{"pct": 50}})
			if hb["cancel_requested"] != false || hb["expires_at"] == nil {
				t.Fatalf("heartbeat: %v", hb)
			}
			rec := w.call("write_record", map[string]any{"bucket": "results", "key": "r1", "value": map[string]any{"sum": 7}, "lease_token": token})
			if rec["version"] != float64(1) || rec["run_id"] != lease["run_id"] {
				t.Fatalf("record: %v", rec)
			}
			done := w.call("submit_task", map[string]any{"task_id": task["id"], "lease_token": token, "outcome": "succeeded",
				"result": map[string]any{"sum": 7}, "idempotency_key": "interop-" + version})
			if done["state"] != "succeeded" {
				t.Fatalf("submit: %v", done)
			}
			empty := w.call("claim_task", map[string]any{})
			if empty["lease"] != nil || empty["retry_after"] != float64(5) {
				t.Fatalf("empty claim: %v", empty)
			}
			batch := w.call("enqueue_tasks", map[string]any{"tasks": []any{
				map[string]any{"title": "batched 1", "queue": "interop"}, map[string]any{"title": "batched 2", "queue": "interop", "priority": 2}}})
			if tasks, _ := batch["tasks"].([]any); len(tasks) != 2 || tasks[1].(map[string]any)["title"] != "batched 2" {
				t.Fatalf("enqueue_tasks: %v", batch)
			}
			// A handled error is a result with isError, valid under the
			// same output schema.
			lost := w.callResult("heartbeat", map[string]any{"task_id": task["id"], "lease_token": token})
			if !lost.IsError || lost.StructuredContent.(map[string]any)["code"] != "lease_lost" {
				t.Fatalf("heartbeat after submit: %+v", lost.StructuredContent)
			}
			t.Logf("%s: %d tools, every result valid under its output schema; task %v %v", version, len(w.schemas), task["id"], done["state"])
		})
	}
}

type goWorker struct {
	t       *testing.T
	ctx     context.Context
	cs      *sdk.ClientSession
	schemas map[string]*jsonschema.Resolved
}

func (w *goWorker) listTools() {
	res, err := w.cs.ListTools(w.ctx, nil)
	if err != nil {
		w.t.Fatalf("tools/list: %v", err)
	}
	for _, tool := range res.Tools {
		b, err := json.Marshal(tool.OutputSchema)
		if err != nil {
			w.t.Fatal(err)
		}
		var schema jsonschema.Schema
		if err := json.Unmarshal(b, &schema); err != nil {
			w.t.Fatalf("%s: output schema: %v", tool.Name, err)
		}
		resolved, err := schema.Resolve(nil)
		if err != nil {
			w.t.Fatalf("%s: output schema does not resolve: %v", tool.Name, err)
		}
		w.schemas[tool.Name] = resolved
	}
	if len(w.schemas) != len(ops.Tools()) {
		w.t.Fatalf("%d tools listed, want %d", len(w.schemas), len(ops.Tools()))
	}
}

// callResult calls a tool and validates its structured content.
func (w *goWorker) callResult(name string, args map[string]any) *sdk.CallToolResult {
	w.t.Helper()
	res, err := w.cs.CallTool(w.ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		w.t.Fatalf("%s: %v", name, err)
	}
	if err := w.schemas[name].Validate(res.StructuredContent); err != nil {
		w.t.Fatalf("%s: structured content %v is not valid under the output schema: %v", name, res.StructuredContent, err)
	}
	return res
}

// call calls a tool that must succeed and returns its structured content.
func (w *goWorker) call(name string, args map[string]any) map[string]any {
	w.t.Helper()
	res := w.callResult(name, args)
	if res.IsError {
		w.t.Fatalf("%s: %v", name, res.StructuredContent)
	}
	return res.StructuredContent.(map[string]any)
}
