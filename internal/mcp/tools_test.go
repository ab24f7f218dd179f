package mcp_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/app"
	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/httpapi"
	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// callTool calls a tool on the 2025-03-26 lane with key ("" for none) and
// returns its result.
func (s *server) callTool(key, name string, args map[string]any) toolResult {
	s.t.Helper()
	r := s.post(rpc(1, "tools/call", map[string]any{"name": name, "arguments": args}), "Authorization", "Bearer "+key)
	if r.Status != http.StatusOK {
		s.t.Fatalf("%s: %d %s", name, r.Status, r.Body)
	}
	return r.one(s.t).tool(s.t)
}

// must calls a tool that has to succeed and decodes its structured
// content into a map.
func (s *server) must(key, name string, args map[string]any) map[string]any {
	s.t.Helper()
	tr := s.callTool(key, name, args)
	var out map[string]any
	if tr.IsError || json.Unmarshal(tr.StructuredContent, &out) != nil {
		s.t.Fatalf("%s: %s", name, tr.StructuredContent)
	}
	return out
}

// A tool that needs a key refuses a missing or bad one with the HTTP
// API's 401 before any JSON-RPC work — for a whole batch — while tools
// that need none ignore the header altogether.
func TestKeyCheckedBeforeJSONRPC(t *testing.T) {
	s := start(t)
	whoami := rpc(1, "tools/call", map[string]any{"name": "whoami", "arguments": map[string]any{}})
	for _, header := range []string{"", "Bearer nonsense", "Bearer tsk_nosuchkey_abcdefghijklmnopqrstuvwxyz0", "Basic abc"} {
		for _, body := range []any{whoami, []any{rpc(2, "ping", nil), whoami}} {
			r := s.post(body, "Authorization", header)
			if r.Status != http.StatusUnauthorized || r.Header.Get("WWW-Authenticate") == "" ||
				!strings.Contains(string(r.Body), `"code":"unauthorized"`) {
				t.Fatalf("%q: %d %v %s", header, r.Status, r.Header, r.Body)
			}
		}
	}
	if tr := s.callTool("tsk_nosuchkey_abcdefghijklmnopqrstuvwxyz0", "explain_access_modes", nil); tr.IsError {
		t.Fatalf("a keyless tool looked at the key: %s", tr.StructuredContent)
	}
	// start_session needs no key: it mints a session whose key then
	// works over MCP, its first call making the practice tasks.
	sess := s.must("", "start_session", nil)
	key, _ := sess["key"].(string)
	ns, _ := sess["namespace"].(string)
	c := s.must(key, "claim_task", map[string]any{"namespace": ns, "queue": "practice"})
	task, _ := c["task"].(map[string]any)
	if title, _ := task["title"].(string); !strings.HasPrefix(title, "1/3") {
		t.Fatalf("a session's first claim over MCP: %v", c)
	}
}

// Tool errors carry the HTTP API's status and code, and are counted under
// the HTTP route's action name; successes are audited under it.
func TestToolErrorsAndAuditMatchHTTP(t *testing.T) {
	s := start(t)
	key := s.newKey("namespace:main", "read", "enqueue", "claim", "write")
	reader := s.newKey("namespace:main", "read")
	e := s.callTool(reader, "enqueue_task", map[string]any{"title": "x"}).err(t, 403, "forbidden")
	if !strings.Contains(e.Message, "enqueue") {
		t.Fatalf("forbidden: %+v", e)
	}
	s.callTool(key, "enqueue_task", map[string]any{"namespace": "other", "title": "x"}).err(t, 403, "forbidden")
	if e := s.callTool(key, "enqueue_task", map[string]any{"namespace": "Bad NS", "title": "x"}).err(t, 400, "invalid_request"); e.Field != "namespace" {
		t.Fatalf("bad namespace: %+v", e)
	}
	if e := s.callTool(key, "enqueue_task", map[string]any{"title": "x", "TITLE": "y"}).err(t, 400, "invalid_request"); e.Field != "TITLE" {
		t.Fatalf("unknown field: %+v", e)
	}
	if e := s.callTool(key, "enqueue_task", map[string]any{"title": "x", "idempotency_key": strings.Repeat("k", 200)}).err(t, 400, "invalid_request"); e.Field != "idempotency_key" {
		t.Fatalf("idempotency_key: %+v", e)
	}
	s.callTool(key, "get_task", map[string]any{"task_id": "01NOSUCHTASK"}).err(t, 404, "not_found")
	s.callTool(key, "get_task", map[string]any{"task_id": "../etc"}).err(t, 404, "not_found")
	task := s.must(key, "enqueue_task", map[string]any{"title": "t"})
	s.callTool(key, "heartbeat", map[string]any{"task_id": task["id"], "lease_token": "stale"}).err(t, 409, "lease_lost")

	r := s.send("GET", "/v1/me/audit", nil, "Authorization", "Bearer "+key)
	var page core.AuditPage
	if err := json.Unmarshal(r.Body, &page); err != nil || r.Status != 200 {
		t.Fatalf("audit: %d %s", r.Status, r.Body)
	}
	if len(page.Events) != 1 || page.Events[0].Action != core.ActTaskEnqueue || page.Events[0].Target != task["id"] {
		t.Fatalf("events: %+v", page.Events)
	}
	counted := map[string]int64{}
	for _, c := range page.Counters {
		counted[c.Action+"/"+c.Outcome] += c.Count
	}
	want := map[string]int64{"task.enqueue/forbidden": 1, "task.enqueue/invalid_request": 3, "task.get/not_found": 2, "claim.heartbeat/lease_lost": 1}
	for k, n := range want {
		if counted[k] != n {
			t.Errorf("counter %s = %d, want %d (all: %v)", k, counted[k], n, counted)
		}
	}
}

// upload_blob drives the three upload steps; the same bytes again answer
// exists; read_blob returns them.
func TestBlobTools(t *testing.T) {
	s := start(t)
	key := s.newKey("namespace:main", "read", "write")
	data := []byte("bytes for the blob tools")
	sum := sha256.Sum256(data)
	hexSum := hex.EncodeToString(sum[:])
	args := map[string]any{"data": base64.StdEncoding.EncodeToString(data), "content_type": "text/plain"}
	up := s.must(key, "upload_blob", args)
	if up["ref"] != "sha256:"+hexSum || up["size"] != float64(len(data)) || up["exists"] != false || up["content_type"] != "text/plain" {
		t.Fatalf("upload: %v", up)
	}
	if again := s.must(key, "upload_blob", args); again["exists"] != true || again["ref"] != up["ref"] {
		t.Fatalf("upload again: %v", again)
	}
	got := s.must(key, "read_blob", map[string]any{"sha256": up["ref"]})
	if b, _ := base64.StdEncoding.DecodeString(got["data"].(string)); !bytes.Equal(b, data) || got["url"] != "http://127.0.0.1:8787/v1/blobs/"+hexSum {
		t.Fatalf("read: %v", got)
	}
	// The same bytes over HTTP, from the same store.
	if r := s.send("GET", "/v1/blobs/"+hexSum, nil, "Authorization", "Bearer "+key); !bytes.Equal(r.Body, data) {
		t.Fatalf("HTTP read: %d %q", r.Status, r.Body)
	}
	if e := s.callTool(key, "upload_blob", map[string]any{"data": "not base64!"}).err(t, 400, "invalid_request"); e.Field != "data" {
		t.Fatalf("bad base64: %+v", e)
	}
	huge := base64.StdEncoding.EncodeToString(make([]byte, 512<<10+1))
	s.callTool(key, "upload_blob", map[string]any{"data": huge}).err(t, 413, "payload_too_large")
}

// claim_task with wait_seconds long-polls as over HTTP: an enqueue wakes
// it at once.
func TestClaimLongPoll(t *testing.T) {
	s := start(t)
	key := s.newKey("namespace:main", "enqueue", "claim")
	var wg sync.WaitGroup
	var claimed map[string]any
	wg.Add(1)
	go func() {
		defer wg.Done()
		claimed = s.must(key, "claim_task", map[string]any{"queue": "later", "wait_seconds": 10})
	}()
	time.Sleep(100 * time.Millisecond)
	task := s.must(key, "enqueue_task", map[string]any{"queue": "later", "title": "arrives"})
	wg.Wait()
	lease, _ := claimed["lease"].(map[string]any)
	if lease["task_id"] != task["id"] {
		t.Fatalf("long-poll claim: %v", claimed)
	}
}

// While storage refuses writes, the storage-free methods still answer and
// a keyed call in the same batch gets the honest quota refusal; nothing
// is written. tools/list with a key writes nothing at all.
func TestBatchWhileStorageRefusesWrites(t *testing.T) {
	s := start(t)
	key := s.newKey("namespace:main", "read", "enqueue")
	if n := s.rowsWritten(func() { s.must(key, "counts", nil) }); n == 0 {
		t.Fatal("a keyed read wrote nothing: its audit event is missing")
	}
	if n := s.rowsWritten(func() {
		s.post(rpc(1, "tools/list", nil), "Authorization", "Bearer "+key).one(t)
	}); n != 0 {
		t.Fatalf("tools/list with a key wrote %d rows", n)
	}
	s.Clock.Set(time.Date(2026, 3, 2, 22, 0, 0, 0, time.UTC))
	s.refuseWrites()
	var out []rpcResponse
	n := s.rowsWritten(func() {
		r := s.post([]any{
			rpc(1, "tools/call", map[string]any{"name": "explain_access_modes", "arguments": map[string]any{}}),
			rpc(2, "tools/call", map[string]any{"name": "enqueue_task", "arguments": map[string]any{"title": "refused"}}),
			rpc(3, "tools/list", nil),
			rpc(4, "tools/call", map[string]any{"name": "counts", "arguments": map[string]any{}}),
			rpc(5, "ping", nil),
		}, "Authorization", "Bearer "+key)
		out = r.batch(t)
	})
	if n != 0 || len(out) != 5 {
		t.Fatalf("wrote %d rows; %d answers", n, len(out))
	}
	if out[0].tool(t).IsError || out[2].Error != nil || out[4].Error != nil {
		t.Fatalf("storage-free calls failed: %+v", out)
	}
	for _, i := range []int{1, 3} {
		e := out[i].tool(t).err(t, 503, "storage_quota_exhausted")
		reset := meter.NextReset(s.Clock.Now())
		if e.RetryAfter != int(math.Ceil(reset.Sub(s.Clock.Now()).Seconds())) || e.ResetAt == nil || !e.ResetAt.Equal(reset) {
			t.Fatalf("quota refusal: %+v, want reset at %s", e, reset)
		}
	}
}

// brokenStore refuses every call, as an unreachable database would.
type brokenStore struct {
	mu    sync.Mutex
	calls int
}

func (b *brokenStore) touch() error {
	b.mu.Lock()
	b.calls++
	b.mu.Unlock()
	return io.ErrUnexpectedEOF
}
func (b *brokenStore) Update(context.Context, func(store.Tx) error) error { return b.touch() }
func (b *brokenStore) View(context.Context, func(store.Tx) error) error   { return b.touch() }
func (b *brokenStore) Close() error                                       { return nil }
func (b *brokenStore) Listen(func(string))                                {}

// The storage-free methods answer from configuration alone — with or
// without a key, single or batched, on every lane — from a server whose
// storage refuses everything, and never touch it.
func TestStorageFreeMethodsNeedNoStorage(t *testing.T) {
	bs := &brokenStore{}
	clock := tessera.NewManualClock(time.Now())
	svc := core.New(bs, auth.NewAuthenticator(bs, clock, 5*time.Second), meter.New(clock), clock, core.DefaultConfig())
	t.Cleanup(svc.Close)
	api, err := httpapi.New(svc, slog.New(slog.NewTextHandler(io.Discard, nil)), httpapi.Config{PublicURL: "http://127.0.0.1:8787", Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(api)
	t.Cleanup(hs.Close)
	s := &server{t: t, URL: hs.URL}
	explain := map[string]any{"name": "explain_access_modes", "arguments": map[string]any{}}
	for _, l := range lanes {
		for _, key := range []string{"", adminKey} {
			auth := []string{"Authorization", "Bearer " + key}
			lane{name: l.name}.result(t, s.post(rpc(1, "initialize", map[string]any{"protocolVersion": "2025-11-25"}), append(auth, "Mcp-Protocol-Version", l.header)...), nil)
			l.result(t, l.call(s, 2, "ping", "", nil, auth...), nil)
			l.result(t, l.call(s, 3, "server/discover", "", nil, auth...), nil)
			l.result(t, l.call(s, 4, "tools/list", "", nil, auth...), nil)
			var tr toolResult
			l.result(t, l.call(s, 5, "tools/call", "explain_access_modes", explain, auth...), &tr)
			if tr.IsError {
				t.Fatalf("%s: %s", l.name, tr.StructuredContent)
			}
			if r := s.post(rpc(nil, "notifications/initialized", nil), append(auth, "Mcp-Protocol-Version", l.header)...); r.Status != 202 {
				t.Fatalf("%s: notification %d", l.name, r.Status)
			}
			r := s.post([]any{l.request(1, "ping", nil), l.request(2, "tools/list", nil), l.request(3, "server/discover", nil),
				l.request(4, "tools/call", explain), rpc(nil, "notifications/initialized", nil)}, append(auth, "Mcp-Protocol-Version", l.header)...)
			if out := r.batch(t); len(out) != 4 || out[3].tool(t).IsError {
				t.Fatalf("%s: batch %s", l.name, r.Body)
			}
		}
	}
	if bs.calls != 0 {
		t.Fatalf("storage-free methods touched the store %d times", bs.calls)
	}
	// A keyed tool does need the store, and says so plainly.
	r := s.post(rpc(1, "tools/call", map[string]any{"name": "counts", "arguments": map[string]any{}}), "Authorization", "Bearer "+adminKey)
	if r.Status != http.StatusInternalServerError || bs.calls == 0 {
		t.Fatalf("keyed call on a broken store: %d after %d calls: %s", r.Status, bs.calls, r.Body)
	}
}

// An empty claim answers lease: null with the HTTP doubling hint — one
// hint per key and queue, whichever transport asks.
func TestEmptyClaimHintIsShared(t *testing.T) {
	s := start(t)
	key := s.newKey("namespace:main", "claim")
	for _, want := range []float64{5, 10} {
		if c := s.must(key, "claim_task", map[string]any{"queue": "idle"}); c["lease"] != nil || c["retry_after"] != want {
			t.Fatalf("empty claim %v, want retry_after %v", c, want)
		}
	}
	r := s.send("POST", "/v1/claims", []byte(`{"queue":"idle"}`), "Authorization", "Bearer "+key)
	if r.Status != http.StatusNoContent || r.Header.Get("Retry-After") != "20" {
		t.Fatalf("HTTP empty claim after two MCP ones: %d Retry-After %q", r.Status, r.Header.Get("Retry-After"))
	}
}

// enqueue_tasks is POST /v1/tasks/batch as a tool: all or none, faults
// named tasks[i].field with the HTTP API's status and code, one key for
// the whole batch, one task.enqueue event per task, and failures counted
// under the route's action.
func TestEnqueueTasksTool(t *testing.T) {
	s := start(t)
	key := s.newKey("namespace:*", "read", "enqueue")
	bad := map[string]any{"namespace": "farm", "tasks": []any{map[string]any{"title": "fine"}, map[string]any{"title": "x", "Queue": "q"}}}
	if e := s.callTool(key, "enqueue_tasks", bad).err(t, 400, "invalid_request"); e.Field != "tasks[1].Queue" {
		t.Fatalf("a bad task: %+v", e)
	}
	if e := s.callTool(key, "enqueue_tasks", map[string]any{"tasks": []any{}}).err(t, 400, "invalid_request"); e.Field != "tasks" {
		t.Fatalf("an empty batch: %+v", e)
	}
	if c := s.must(key, "counts", map[string]any{"namespace": "farm"}); len(c["queues"].(map[string]any)) != 0 {
		t.Fatalf("a refused batch left tasks: %v", c)
	}

	args := map[string]any{"namespace": "farm", "idempotency_key": "farm-batch-1", "tasks": []any{
		map[string]any{"title": "one", "queue": "a"}, map[string]any{"title": "two", "queue": "b", "payload": map[string]any{"n": 2}}}}
	first := s.callTool(key, "enqueue_tasks", args)
	var batch core.TaskBatch
	if first.IsError || json.Unmarshal(first.StructuredContent, &batch) != nil || len(batch.Tasks) != 2 ||
		batch.Tasks[0].Title != "one" || batch.Tasks[1].Queue != "b" || batch.Tasks[1].Namespace != "farm" {
		t.Fatalf("enqueue_tasks: %s", first.StructuredContent)
	}
	if again := s.callTool(key, "enqueue_tasks", args); !jsonEqual(string(again.StructuredContent), string(first.StructuredContent)) {
		t.Fatalf("replay: %s, want %s", again.StructuredContent, first.StructuredContent)
	}
	args["tasks"] = []any{map[string]any{"title": "other"}}
	s.callTool(key, "enqueue_tasks", args).err(t, 409, "idempotency_conflict")
	// The same tasks over HTTP, from the same store.
	r := s.send("GET", "/ns/farm/v1/tasks/"+batch.Tasks[1].ID, nil, "Authorization", "Bearer "+key)
	if r.Status != 200 || !strings.Contains(string(r.Body), `"payload":{"n":2}`) {
		t.Fatalf("HTTP read: %d %s", r.Status, r.Body)
	}

	r = s.send("GET", "/v1/me/audit", nil, "Authorization", "Bearer "+key)
	var page core.AuditPage
	if err := json.Unmarshal(r.Body, &page); err != nil || r.Status != 200 {
		t.Fatalf("audit: %d %s", r.Status, r.Body)
	}
	var targets []string
	for _, e := range page.Events {
		if e.Action == core.ActTaskEnqueue {
			targets = append(targets, e.Target)
		}
	}
	if len(targets) != 2 || targets[0] != batch.Tasks[1].ID || targets[1] != batch.Tasks[0].ID {
		t.Fatalf("task.enqueue events (newest first) %v, want %s %s", targets, batch.Tasks[1].ID, batch.Tasks[0].ID)
	}
	counted := map[string]int64{}
	for _, c := range page.Counters {
		counted[c.Action+"/"+c.Outcome] += c.Count
	}
	for k, n := range map[string]int64{"task.enqueue_batch/invalid_request": 2, "task.enqueue_batch/replayed": 1, "task.enqueue_batch/idempotency_conflict": 1} {
		if counted[k] != n {
			t.Errorf("counter %s = %d, want %d (all: %v)", k, counted[k], n, counted)
		}
	}
}

// enqueue_tasks describes its tasks as enqueue_task's arguments.
func TestEnqueueTasksSchema(t *testing.T) {
	s := start(t)
	var list struct {
		Tools []struct {
			Name        string         `json:"name"`
			InputSchema map[string]any `json:"inputSchema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(s.post(rpc(1, "tools/list", nil)).one(t).Result, &list); err != nil {
		t.Fatal(err)
	}
	for _, tool := range list.Tools {
		if tool.Name != "enqueue_tasks" {
			continue
		}
		props := tool.InputSchema["properties"].(map[string]any)
		tasks, _ := props["tasks"].(map[string]any)
		items, _ := tasks["items"].(map[string]any)
		defs, _ := tool.InputSchema["$defs"].(map[string]any)
		task, _ := defs["CoreEnqueueParams"].(map[string]any)
		if items["$ref"] != "#/$defs/CoreEnqueueParams" || task == nil || props["idempotency_key"] == nil || props["namespace"] == nil {
			t.Fatalf("enqueue_tasks input schema: %v", tool.InputSchema)
		}
		if req, _ := tool.InputSchema["required"].([]any); len(req) != 1 || req[0] != "tasks" {
			t.Fatalf("enqueue_tasks requires %v, want tasks", tool.InputSchema["required"])
		}
		return
	}
	t.Fatal("tools/list has no enqueue_tasks")
}

// Each call in a batch spends one of a session's requests, as an HTTP
// request does: a batch of 8 calls on a quota of 5 has 5 answered and 3
// refused, and the session is spent.
func TestBatchSpendsTheSessionQuotaPerCall(t *testing.T) {
	s := startWith(t, func(o *app.Options) { o.Core.Sessions.Requests = 5 })
	var sess core.Session
	if r := s.post(rpc(1, "tools/call", map[string]any{"name": "start_session", "arguments": map[string]any{}})); r.Status != 200 {
		t.Fatalf("start_session: %d %s", r.Status, r.Body)
	} else {
		var res struct {
			Result struct {
				StructuredContent core.Session `json:"structuredContent"`
			} `json:"result"`
		}
		if err := json.Unmarshal(r.Body, &res); err != nil {
			t.Fatal(err)
		}
		sess = res.Result.StructuredContent
	}
	var batch []map[string]any
	for i := range 8 {
		batch = append(batch, rpc(i, "tools/call", map[string]any{"name": "counts", "arguments": map[string]any{"namespace": sess.Namespace}}))
	}
	r := s.post(batch, "Authorization", "Bearer "+sess.Key)
	var answers []struct {
		Result struct {
			IsError           bool           `json:"isError"`
			StructuredContent map[string]any `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal(r.Body, &answers); err != nil || len(answers) != 8 {
		t.Fatalf("batch: %d %s", r.Status, r.Body)
	}
	for i, a := range answers {
		refused := a.Result.IsError && a.Result.StructuredContent["code"] == "rate_limited"
		if refused != (i >= 5) {
			t.Errorf("call %d: %v", i, a.Result.StructuredContent)
		}
	}
	one := s.post(rpc(9, "tools/call", map[string]any{"name": "counts", "arguments": map[string]any{"namespace": sess.Namespace}}), "Authorization", "Bearer "+sess.Key)
	if !strings.Contains(string(one.Body), `"rate_limited"`) {
		t.Fatalf("after the batch: %s", one.Body)
	}
}

// The long-polls of one batch share one wait: three claims of 20 s each
// on an empty queue, under a batch budget of 1 s, all answer empty
// without waiting their 20 s each.
func TestBatchOfLongPollsSharesOneWait(t *testing.T) {
	s := startWith(t, func(o *app.Options) { o.HTTP.MCPBatchWait = time.Second })
	key := s.newKey("namespace:main", "claim")
	var batch []map[string]any
	for i := range 3 {
		batch = append(batch, rpc(i, "tools/call", map[string]any{"name": "claim_task", "arguments": map[string]any{"queue": "empty", "wait_seconds": 20}}))
	}
	start := time.Now()
	r := s.post(batch, "Authorization", "Bearer "+key)
	took := time.Since(start)
	var answers []struct {
		Result struct {
			StructuredContent core.Claimed `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal(r.Body, &answers); err != nil || len(answers) != 3 {
		t.Fatalf("batch: %d %s", r.Status, r.Body)
	}
	for i, a := range answers {
		if a.Result.StructuredContent.Lease != nil || a.Result.StructuredContent.RetryAfter == 0 {
			t.Errorf("claim %d: %+v", i, a.Result.StructuredContent)
		}
	}
	// One claim alone would wait 20 s; the three took the budget.
	if took >= 20*time.Second {
		t.Fatalf("the batch took %s: its long-polls did not share the budget", took)
	}
}

// A claim made over MCP is measured where one over HTTP is: one point per
// operation call, whatever the transport.
func TestMCPClaimsReachTheClaimWaitMetric(t *testing.T) {
	s := start(t)
	key := s.newKey("namespace:main", "enqueue", "claim")
	s.must(key, "enqueue_task", map[string]any{"title": "t", "queue": "m"})
	s.must(key, "claim_task", map[string]any{"queue": "m"})
	s.must(key, "claim_task", map[string]any{"queue": "m"})
	r := s.send("GET", "/metrics", nil, "Authorization", "Bearer "+adminKey)
	for _, want := range []string{
		`tessera_claim_wait_seconds_count{outcome="granted"} 1`,
		`tessera_claim_wait_seconds_count{outcome="empty"} 1`,
		`tessera_operations_total{code="ok",op="claim.grant",transport="mcp"} 2`,
	} {
		if !strings.Contains(string(r.Body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
