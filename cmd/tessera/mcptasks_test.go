package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/client"
	"github.com/tessera-dev/tessera/internal/store/postgres/pgtest"
)

// An MCP task handle made on node A is read, worked, answered and
// cancelled through node B: the handle is the task in the shared store, so no node holds it.
func TestMCPTaskHandleAcrossNodes(t *testing.T) {
	url := pgtest.Schema(t)
	nodes := startNodes(t, buildTessera(t), url, 2)
	call := func(node *server, method, name string, params map[string]any) json.RawMessage {
		t.Helper()
		params["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
			"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}}
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
		req, _ := http.NewRequest("POST", node.url+"/mcp", strings.NewReader(string(body)))
		for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
			"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": method, "Mcp-Name": name, "Authorization": "Bearer " + crashAdminKey} {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		var out struct {
			Result json.RawMessage `json:"result"`
			Error  any             `json:"error"`
		}
		if json.Unmarshal(b, &out) != nil || out.Error != nil || res.StatusCode != 200 {
			t.Fatalf("%s on %s: %d %s", method, node.url, res.StatusCode, b)
		}
		return out.Result
	}
	type handle struct {
		TaskID string          `json:"taskId"`
		Status string          `json:"status"`
		Result json.RawMessage `json:"result"`
	}
	get := func(node *server, id string) handle {
		var h handle
		_ = json.Unmarshal(call(node, "tasks/get", id, map[string]any{"taskId": id}), &h)
		return h
	}
	var made handle
	_ = json.Unmarshal(call(nodes[0], "tools/call", "run_task", map[string]any{"name": "run_task",
		"arguments": map[string]any{"title": "across", "queue": "across"}}), &made)
	if got := get(nodes[1], made.TaskID); got.Status != "working" {
		t.Fatalf("node B reads %+v", got)
	}
	// Node A pushes what node B's worker does.
	pushed := listen(t, nodes[0], made.TaskID)
	worker, err := client.New(nodes[1].url, client.WithKey(crashAdminKey))
	if err != nil {
		t.Fatal(err)
	}
	err = worker.Work(context.Background(), "across", func(context.Context, *client.Job) (any, error) {
		return map[string]int{"n": 1}, nil
	}, client.WorkOptions{MaxTasks: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := get(nodes[0], made.TaskID); got.Status != "completed" || !strings.Contains(string(got.Result), `"structuredContent":{"n":1}`) {
		t.Fatalf("node A reads %+v %s", got, got.Result)
	}

	for {
		m, ok := <-pushed
		if !ok {
			t.Fatal("node A's subscription ended before the task completed")
		}
		if m.Method == "notifications/tasks" && m.Params.Status == "completed" {
			break
		}
	}

	// A gate opened through node B's worker is input_required on B and
	// answered there; the worker's next claim, on node A, has the answer.
	var gated handle
	_ = json.Unmarshal(call(nodes[0], "tools/call", "run_task", map[string]any{"name": "run_task",
		"arguments": map[string]any{"title": "gated across", "queue": "across"}}), &gated)
	var claim nodeLease
	nodes[1].must(200, "POST", "/v1/claims", crashAdminKey, map[string]any{"queue": "across"}, &claim)
	nodes[1].must(200, "POST", "/v1/claims/"+claim.Lease.TaskID+"/gate", crashAdminKey, map[string]any{"lease_token": claim.Lease.Token,
		"key": "approve", "message": "Go ahead?"}, nil)
	var asked struct {
		Status        string `json:"status"`
		InputRequests map[string]struct {
			Method string `json:"method"`
		} `json:"inputRequests"`
	}
	_ = json.Unmarshal(call(nodes[1], "tasks/get", gated.TaskID, map[string]any{"taskId": gated.TaskID}), &asked)
	if asked.Status != "input_required" || len(asked.InputRequests) != 1 || asked.InputRequests["approve"].Method != "elicitation/create" {
		t.Fatalf("node B reads the gated handle as %+v", asked)
	}
	call(nodes[1], "tasks/update", gated.TaskID, map[string]any{"taskId": gated.TaskID,
		"inputResponses": map[string]any{"approve": map[string]any{"action": "accept"}}})
	var again struct {
		nodeLease
		GateAnswers map[string]struct {
			Action string `json:"action"`
		} `json:"gate_answers"`
	}
	nodes[0].must(200, "POST", "/v1/claims", crashAdminKey, map[string]any{"queue": "across"}, &again)
	if again.Lease.TaskID != claim.Lease.TaskID || len(again.GateAnswers) != 1 || again.GateAnswers["approve"].Action != "accept" {
		t.Fatalf("node A's claim after the answer on B: %+v", again)
	}
	nodes[0].must(200, "POST", "/v1/claims/"+again.Lease.TaskID+"/submit", crashAdminKey, map[string]any{"lease_token": again.Lease.Token, "outcome": "succeeded"}, nil)

	var second handle
	_ = json.Unmarshal(call(nodes[0], "tools/call", "run_task", map[string]any{"name": "run_task",
		"arguments": map[string]any{"title": "cancelled across", "queue": "across"}}), &second)
	call(nodes[1], "tasks/cancel", second.TaskID, map[string]any{"taskId": second.TaskID})
	if got := get(nodes[0], second.TaskID); got.Status != "cancelled" {
		t.Fatalf("after a cancel on B, A reads %+v", got)
	}
}

// pushedMessage is a message on a subscriptions/listen stream.
type pushedMessage struct {
	Method string `json:"method"`
	Params struct {
		Status string `json:"status"`
	} `json:"params"`
}

// listen subscribes to a task handle on node, and returns the stream's
// messages; the channel closes when the stream ends or 30 s pass.
func listen(t *testing.T, node *server, handle string) <-chan pushedMessage {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": map[string]any{
		"notifications": map[string]any{"taskIds": []string{handle}},
		"_meta": map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
			"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}}}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "POST", node.url+"/mcp", strings.NewReader(string(body)))
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "subscriptions/listen", "Authorization": "Bearer " + crashAdminKey} {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("listen on %s: %v %v", node.url, err, res)
	}
	out := make(chan pushedMessage, 16)
	go func() {
		defer close(out)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			var m pushedMessage
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && json.Unmarshal([]byte(data), &m) == nil {
				out <- m
			}
		}
	}()
	return out
}
