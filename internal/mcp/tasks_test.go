package mcp_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/core"
)

// tasksClient speaks 2026-07-28 with a key, declaring the tasks extension
// or not.
type tasksClient struct {
	s        *server
	key      string
	declared bool
}

func (tc tasksClient) send(method, name string, params map[string]any) *reply {
	tc.s.t.Helper()
	caps := map[string]any{}
	if tc.declared {
		caps["extensions"] = map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}
	}
	params["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": caps}
	return tc.s.post(rpc(1, method, params), "Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", method, "Mcp-Name", name,
		"Authorization", "Bearer "+tc.key)
}

// taskState is a task handle as tasks/get and run_task answer it.
type taskState struct {
	ResultType     string          `json:"resultType"`
	TaskID         string          `json:"taskId"`
	Status         string          `json:"status"`
	StatusMessage  string          `json:"statusMessage"`
	CreatedAt      time.Time       `json:"createdAt"`
	LastUpdatedAt  time.Time       `json:"lastUpdatedAt"`
	TTLMs          *int64          `json:"ttlMs"`
	PollIntervalMs int             `json:"pollIntervalMs"`
	Result         json.RawMessage `json:"result"`
}

func (tc tasksClient) state(r *reply) taskState {
	tc.s.t.Helper()
	res := r.one(tc.s.t)
	var st taskState
	if r.Status != http.StatusOK || res.Error != nil || json.Unmarshal(res.Result, &st) != nil {
		tc.s.t.Fatalf("not a task: %d %s", r.Status, r.Body)
	}
	return st
}

func (tc tasksClient) run(args map[string]any) taskState {
	tc.s.t.Helper()
	st := tc.state(tc.send("tools/call", "run_task", map[string]any{"name": "run_task", "arguments": args}))
	if st.ResultType != "task" || st.TaskID == "" {
		tc.s.t.Fatalf("run_task answered %+v, want a task handle", st)
	}
	return st
}

func (tc tasksClient) get(id string) taskState {
	tc.s.t.Helper()
	st := tc.state(tc.send("tasks/get", id, map[string]any{"taskId": id}))
	if st.ResultType != "complete" || st.TaskID != id {
		tc.s.t.Fatalf("tasks/get answered %+v", st)
	}
	return st
}

// An agent hands work off with run_task and follows it with tasks/get
// until the worker's result is in, as the tasks extension has it: the
// handle is the durable task, good only for its maker.
func TestRunTaskHandsWorkOff(t *testing.T) {
	s := start(t)
	agent := tasksClient{s: s, key: s.newKey("namespace:main", "enqueue", "read"), declared: true}
	worker := s.newKey("namespace:main", "claim")

	// server/discover advertises the extension.
	r := agent.send("server/discover", "", map[string]any{})
	var disc struct {
		Capabilities struct {
			Extensions map[string]json.RawMessage `json:"extensions"`
		} `json:"capabilities"`
	}
	if json.Unmarshal(r.one(t).Result, &disc) != nil || string(disc.Capabilities.Extensions["io.modelcontextprotocol/tasks"]) != "{}" {
		t.Fatalf("server/discover: %s", r.Body)
	}

	// Without the extension declared, run_task is refused as the
	// revision says for a tool that only answers with a task.
	undeclared := agent
	undeclared.declared = false
	res := wantRPCError(t, undeclared.send("tools/call", "run_task", map[string]any{"name": "run_task", "arguments": map[string]any{"title": "x"}}),
		http.StatusOK, -32021)
	if !strings.Contains(string(res.Error.Data), `"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}`) {
		t.Fatalf("-32021 data: %s", res.Error.Data)
	}

	created := agent.run(map[string]any{"title": "summarise", "queue": "research", "payload": map[string]any{"doc": 7}})
	if created.Status != "working" || created.StatusMessage != "ready: waiting for a worker to claim it" || created.TTLMs != nil ||
		created.PollIntervalMs != 2000 || !created.CreatedAt.Equal(s.Clock.Now()) || !strings.HasPrefix(created.TaskID, "main:") {
		t.Fatalf("handle %+v", created)
	}
	if got := agent.get(created.TaskID); got.Status != "working" || got.StatusMessage != created.StatusMessage {
		t.Fatalf("tasks/get before a claim: %+v", got)
	}

	// A worker claims it: still working, and the message says so.
	c := s.must(worker, "claim_task", map[string]any{"queue": "research"})
	lease := c["lease"].(map[string]any)
	taskID := c["task"].(map[string]any)["id"].(string)
	if "main:"+taskID != created.TaskID {
		t.Fatalf("claimed %s, handle %s", taskID, created.TaskID)
	}
	if got := agent.get(created.TaskID); got.Status != "working" || !strings.HasPrefix(got.StatusMessage, "leased:") {
		t.Fatalf("tasks/get while leased: %+v", got)
	}
	s.Clock.Advance(3 * time.Second)
	s.must(worker, "submit_task", map[string]any{"task_id": taskID, "lease_token": lease["token"], "outcome": "succeeded",
		"result": map[string]any{"summary": "short"}})

	done := agent.get(created.TaskID)
	var result toolResult
	if done.Status != "completed" || json.Unmarshal(done.Result, &result) != nil || result.IsError ||
		string(result.StructuredContent) != `{"summary":"short"}` || len(result.Content) != 1 || !jsonEqual(result.Content[0].Text, `{"summary":"short"}`) {
		t.Fatalf("completed: %+v %s", done, done.Result)
	}
	// ttlMs: from creation until retention deletes the finished task.
	if want := (3*time.Second + core.DefaultRetainFinished).Milliseconds(); done.TTLMs == nil || *done.TTLMs != want ||
		!done.LastUpdatedAt.Equal(s.Clock.Now()) {
		t.Fatalf("ttlMs %v lastUpdatedAt %v, want %d and now", done.TTLMs, done.LastUpdatedAt, want)
	}
}

// A handle is its maker's: another principal, even one that may read the
// namespace, a malformed handle and an unknown one all get the same
// invalid-params error; Mcp-Name must name the handle; the methods the
// 2026-07-28 extension dropped are not found.
func TestTaskHandlesAreTheirMakers(t *testing.T) {
	s := start(t)
	agent := tasksClient{s: s, key: s.newKey("namespace:main", "enqueue", "read"), declared: true}
	other := tasksClient{s: s, key: s.newKey("namespace:main", "enqueue", "read"), declared: true}
	h := agent.run(map[string]any{"title": "mine"})

	for _, c := range []struct {
		who tasksClient
		id  string
	}{{other, h.TaskID}, {agent, "main:01JF0000000000000000000000"}, {agent, "nonsense"}, {agent, "Main:" + strings.TrimPrefix(h.TaskID, "main:")}} {
		for _, method := range []string{"tasks/get", "tasks/cancel", "tasks/update"} {
			res := wantRPCError(t, c.who.send(method, c.id, map[string]any{"taskId": c.id, "inputResponses": map[string]any{}}), http.StatusOK, -32602)
			if !strings.HasPrefix(res.Error.Message, "unknown task") {
				t.Fatalf("%s %s: %s", method, c.id, res.Error.Message)
			}
		}
	}
	if got := agent.get(h.TaskID); got.Status != "working" {
		t.Fatalf("another's cancel reached the task: %+v", got)
	}
	wantRPCError(t, agent.send("tasks/get", "main:other", map[string]any{"taskId": h.TaskID}), http.StatusBadRequest, -32020)
	for _, method := range []string{"tasks/list", "tasks/result"} {
		wantRPCError(t, agent.send(method, h.TaskID, map[string]any{"taskId": h.TaskID}), http.StatusNotFound, -32601)
	}
}

// tasks/cancel is acknowledged at once and cancels the task; a task that
// ended first keeps its end, and the cancel is still acknowledged. A task
// that dies is completed with isError: a tool-level failure.
func TestTaskHandleCancelAndDeath(t *testing.T) {
	s := start(t)
	agent := tasksClient{s: s, key: s.newKey("namespace:main", "enqueue", "read"), declared: true}
	worker := s.newKey("namespace:main", "claim")

	h := agent.run(map[string]any{"title": "cancel me", "queue": "c"})
	for range 2 {
		r := agent.send("tasks/cancel", h.TaskID, map[string]any{"taskId": h.TaskID})
		if fields := (lane{name: "2026-07-28", header: "2026-07-28", modern: true}).result(t, r, nil); len(fields) != 2 {
			t.Fatalf("tasks/cancel answered more than an acknowledgement: %s", r.Body)
		}
	}
	if got := agent.get(h.TaskID); got.Status != "cancelled" || got.Result != nil {
		t.Fatalf("after tasks/cancel: %+v", got)
	}

	d := agent.run(map[string]any{"title": "fail me", "queue": "d", "max_attempts": 1})
	c := s.must(worker, "claim_task", map[string]any{"queue": "d"})
	s.must(worker, "submit_task", map[string]any{"task_id": c["task"].(map[string]any)["id"], "lease_token": c["lease"].(map[string]any)["token"],
		"outcome": "failed", "error": "the report was empty"})
	dead := agent.get(d.TaskID)
	var result toolResult
	if dead.Status != "completed" || json.Unmarshal(dead.Result, &result) != nil || !result.IsError ||
		result.Content[0].Text != "the report was empty" || dead.StatusMessage != "dead: the report was empty" {
		t.Fatalf("dead: %+v %s", dead, dead.Result)
	}
	// The update of a task that asks for nothing is acknowledged and ignored.
	r := agent.send("tasks/update", d.TaskID, map[string]any{"taskId": d.TaskID, "inputResponses": map[string]any{"k": map[string]any{"action": "accept"}}})
	if res := r.one(t); res.Error != nil || r.Status != http.StatusOK {
		t.Fatalf("tasks/update: %s", r.Body)
	}
	if got := agent.get(h.TaskID); got.Status != "cancelled" {
		t.Fatalf("after a cancel of a canceled task: %+v", got)
	}
}

// listen opens a subscriptions/listen stream and returns its messages as
// they come, and the HTTP answer when it is not a stream.
func (tc tasksClient) listen(ids ...string) (<-chan map[string]any, *reply) {
	tc.s.t.Helper()
	caps := map[string]any{}
	if tc.declared {
		caps["extensions"] = map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}
	}
	body, _ := json.Marshal(rpc(1, "subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": ids},
		"_meta": map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": caps}}))
	req, _ := http.NewRequest("POST", tc.s.URL+"/mcp", bytes.NewReader(body))
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "subscriptions/listen", "Authorization": "Bearer " + tc.key} {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		tc.s.t.Fatal(err)
	}
	if res.Header.Get("Content-Type") != "text/event-stream" {
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return nil, &reply{Status: res.StatusCode, Header: res.Header, Body: b}
	}
	msgs := make(chan map[string]any, 16)
	tc.s.t.Cleanup(func() { res.Body.Close() })
	go func() {
		defer close(msgs)
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			var m map[string]any
			if ok && json.Unmarshal([]byte(data), &m) == nil {
				msgs <- m
			}
		}
	}()
	return msgs, nil
}

// next is the stream's next message; nil when it ended.
func next(t *testing.T, msgs <-chan map[string]any) map[string]any {
	t.Helper()
	select {
	case m := <-msgs:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no message on the subscription in 10 s")
		return nil
	}
}

// subscriptions/listen pushes each followed task whole as it changes —
// ready, leased, completed with its result — acknowledging only the
// caller's own handles, and ends when every task it follows has ended.
func TestListenPushesTaskChanges(t *testing.T) {
	s := start(t)
	agent := tasksClient{s: s, key: s.newKey("namespace:main", "enqueue", "read"), declared: true}
	other := tasksClient{s: s, key: s.newKey("namespace:main", "enqueue", "read"), declared: true}
	worker := s.newKey("namespace:main", "claim")
	h := agent.run(map[string]any{"title": "followed", "queue": "l"})
	theirs := other.run(map[string]any{"title": "not yours", "queue": "l2"})

	undeclared := agent
	undeclared.declared = false
	if _, r := undeclared.listen(h.TaskID); r == nil || r.one(t).Error == nil || r.one(t).Error.Code != -32021 {
		t.Fatalf("listen without the extension: %+v", r)
	}
	batch := s.post([]any{rpc(1, "subscriptions/listen", map[string]any{"notifications": map[string]any{}})}, "Authorization", "Bearer "+agent.key)
	if res := batch.batch(t); len(res) != 1 || res[0].Error == nil || res[0].Error.Code != -32600 {
		t.Fatalf("listen in a batch: %s", batch.Body)
	}

	msgs, r := agent.listen(h.TaskID, theirs.TaskID, "main:nonsense")
	if r != nil {
		t.Fatalf("listen: %d %s", r.Status, r.Body)
	}
	ack := next(t, msgs)
	params, _ := ack["params"].(map[string]any)
	ids, _ := params["notifications"].(map[string]any)["taskIds"].([]any)
	if ack["method"] != "notifications/subscriptions/acknowledged" || len(ids) != 1 || ids[0] != h.TaskID ||
		params["_meta"].(map[string]any)["io.modelcontextprotocol/subscriptionId"] != float64(1) {
		t.Fatalf("acknowledgement %v", ack)
	}
	status := func(m map[string]any) (string, string) {
		t.Helper()
		p, _ := m["params"].(map[string]any)
		if m["method"] != "notifications/tasks" || p["taskId"] != h.TaskID || p["_meta"].(map[string]any)["io.modelcontextprotocol/subscriptionId"] != float64(1) {
			t.Fatalf("not a notification of the task: %v", m)
		}
		msg, _ := p["statusMessage"].(string)
		return p["status"].(string), msg
	}
	if st, msg := status(next(t, msgs)); st != "working" || !strings.HasPrefix(msg, "ready:") {
		t.Fatalf("first: %s %s", st, msg)
	}
	c := s.must(worker, "claim_task", map[string]any{"queue": "l"})
	if st, msg := status(next(t, msgs)); st != "working" || !strings.HasPrefix(msg, "leased:") {
		t.Fatalf("after the claim: %s %s", st, msg)
	}
	s.must(worker, "submit_task", map[string]any{"task_id": c["task"].(map[string]any)["id"], "lease_token": c["lease"].(map[string]any)["token"],
		"outcome": "succeeded", "result": map[string]any{"ok": true}})
	done := next(t, msgs)
	if st, _ := status(done); st != "completed" || !strings.Contains(fmt.Sprint(done["params"].(map[string]any)["result"]), "structuredContent:map[ok:true]") {
		t.Fatalf("after the submit: %v", done)
	}
	if m, open := <-msgs; open {
		t.Fatalf("the stream went on after its task ended: %v", m)
	}
}

// A worker parks a handed-off task on gates: the handle is input_required
// with the gates as elicitations — a form with its schema, an approval as
// a form with no fields, a url gate as url mode pointing at the console —
// and the maker answers with tasks/update. An answer its schema refuses is
// invalid params naming the field; a key not asked is ignored; the
// worker's next claim carries the answers.
func TestTaskHandleInputRequired(t *testing.T) {
	s := start(t)
	agent := tasksClient{s: s, key: s.newKey("namespace:main", "enqueue", "read"), declared: true}
	worker := s.newKey("namespace:main", "claim")
	h := agent.run(map[string]any{"title": "deploy", "queue": "g"})
	c := s.must(worker, "claim_task", map[string]any{"queue": "g"})
	taskID := c["task"].(map[string]any)["id"].(string)
	s.must(worker, "open_gate", map[string]any{"task_id": taskID, "lease_token": c["lease"].(map[string]any)["token"], "gates": []map[string]any{
		{"key": "region", "message": "Where?", "schema": map[string]any{"type": "object", "required": []string{"r"},
			"properties": map[string]any{"r": map[string]any{"type": "string", "enum": []string{"eu", "us"}}}}},
		{"key": "ok", "message": "Go ahead?"},
		{"key": "login", "message": "Sign in", "url": "https://auth.example/x"},
	}})

	r := agent.send("tasks/get", h.TaskID, map[string]any{"taskId": h.TaskID})
	var got struct {
		Status        string `json:"status"`
		StatusMessage string `json:"statusMessage"`
		InputRequests map[string]struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		} `json:"inputRequests"`
	}
	if json.Unmarshal(r.one(t).Result, &got) != nil || got.Status != "input_required" || got.StatusMessage != "gated: waiting for 3 answer(s)" || len(got.InputRequests) != 3 {
		t.Fatalf("gated handle: %s", r.Body)
	}
	for key, want := range map[string]string{
		"region": `{"mode":"form","message":"Where?","requestedSchema":{"properties":{"r":{"enum":["eu","us"],"type":"string"}},"required":["r"],"type":"object"}}`,
		"ok":     `{"mode":"form","message":"Go ahead?","requestedSchema":{"type":"object","properties":{}}}`,
		"login": `{"mode":"url","message":"Sign in","url":"http://127.0.0.1:8787/console#/ns/main/task/` + taskID +
			`","elicitationId":"` + h.TaskID + `:login"}`,
	} {
		if ir := got.InputRequests[key]; ir.Method != "elicitation/create" || !jsonEqual(string(ir.Params), want) {
			t.Errorf("%s: %s %s, want %s", key, ir.Method, ir.Params, want)
		}
	}

	update := func(responses map[string]any) *reply {
		return agent.send("tasks/update", h.TaskID, map[string]any{"taskId": h.TaskID, "inputResponses": responses})
	}
	res := wantRPCError(t, update(map[string]any{"region": map[string]any{"action": "accept", "content": map[string]any{"r": "mars"}}}), http.StatusOK, -32602)
	if !strings.Contains(res.Error.Message, `inputResponses.region: field "r": "mars" is not one of the choices`) {
		t.Fatalf("refused content: %s", res.Error.Message)
	}
	for _, responses := range []map[string]any{
		{"region": map[string]any{"action": "accept", "content": map[string]any{"r": "eu"}}, "unasked": map[string]any{"action": "accept"}},
		{"ok": map[string]any{"action": "decline"}, "region": map[string]any{"action": "decline"}}, // region keeps its first answer
	} {
		if r := update(responses); r.one(t).Error != nil {
			t.Fatalf("tasks/update: %s", r.Body)
		}
	}
	if st := agent.get(h.TaskID); st.Status != "input_required" {
		t.Fatalf("one gate open: %+v", st)
	}
	if r := update(map[string]any{"login": map[string]any{"action": "accept"}}); r.one(t).Error != nil {
		t.Fatalf("tasks/update: %s", r.Body)
	}
	if st := agent.get(h.TaskID); st.Status != "working" || st.StatusMessage != "ready: waiting for a worker to claim it" {
		t.Fatalf("all answered: %+v", st)
	}
	again := s.must(worker, "claim_task", map[string]any{"queue": "g"})
	answers, _ := json.Marshal(again["gate_answers"])
	var byKey map[string]struct {
		Action  string          `json:"action"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(answers, &byKey) != nil || byKey["region"].Action != "accept" || string(byKey["region"].Content) != `{"r":"eu"}` ||
		byKey["ok"].Action != "decline" || byKey["login"].Action != "accept" {
		t.Fatalf("the worker's claim: %s", answers)
	}
}
