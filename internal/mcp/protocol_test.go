package mcp_test

import (
	"encoding/base64"
	"encoding/json"
	"github.com/tessera-dev/tessera/internal/ops"
	"net/http"
	"strings"
	"testing"
)

// lane is one protocol revision as a client speaks it on the wire.
type lane struct {
	name string
	// header is the MCP-Protocol-Version header ("" sends none).
	header string
	modern bool
}

var lanes = []lane{
	{name: "no header (2025-03-26)"},
	{name: "2025-03-26", header: "2025-03-26"},
	{name: "2025-06-18", header: "2025-06-18"},
	{name: "2025-11-25", header: "2025-11-25"},
	{name: "2026-07-28", header: "2026-07-28", modern: true},
}

// request builds one request of the lane: on 2026-07-28 with the _meta
// every request carries.
func (l lane) request(id any, method string, params map[string]any) map[string]any {
	if l.modern && id != nil {
		if params == nil {
			params = map[string]any{}
		}
		params["_meta"] = modernMeta()
	}
	return rpc(id, method, params)
}

// headers are the lane's headers for a single message: on 2026-07-28 with
// Mcp-Method and, for tools/call, Mcp-Name.
func (l lane) headers(method, tool string, extra ...string) []string {
	var h []string
	if l.header != "" {
		h = append(h, "Mcp-Protocol-Version", l.header)
	}
	if l.modern {
		h = append(h, "Mcp-Method", method)
		if tool != "" {
			h = append(h, "Mcp-Name", tool)
		}
	}
	return append(h, extra...)
}

func (l lane) call(s *server, id any, method, tool string, params map[string]any, extra ...string) *reply {
	return s.post(l.request(id, method, params), l.headers(method, tool, extra...)...)
}

// result decodes a successful single answer, checking what the lane puts
// on every result.
func (l lane) result(t *testing.T, r *reply, v any) map[string]any {
	t.Helper()
	if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("%s: status %d %q: %s", l.name, r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	if r.Header.Get("Mcp-Session-Id") != "" {
		t.Fatalf("%s: a session id was minted", l.name)
	}
	res := r.one(t)
	if res.Error != nil {
		t.Fatalf("%s: error %+v", l.name, res.Error)
	}
	var fields map[string]any
	if err := json.Unmarshal(res.Result, &fields); err != nil {
		t.Fatal(err)
	}
	_, hasType := fields["resultType"]
	if l.modern != hasType || (l.modern && fields["resultType"] != "complete") {
		t.Fatalf("%s: resultType %v in %s", l.name, fields["resultType"], res.Result)
	}
	if l.modern {
		info, _ := fields["_meta"].(map[string]any)["io.modelcontextprotocol/serverInfo"].(map[string]any)
		if info["name"] != "tessera" {
			t.Fatalf("%s: no serverInfo in _meta: %s", l.name, res.Result)
		}
	}
	if v != nil {
		if err := json.Unmarshal(res.Result, v); err != nil {
			t.Fatal(err)
		}
	}
	return fields
}

// Every method answers on every lane, with each lane's result shape.
func TestMethodsOnEveryLane(t *testing.T) {
	s := start(t)
	for _, l := range lanes {
		t.Run(l.name, func(t *testing.T) {
			var init struct {
				ProtocolVersion string `json:"protocolVersion"`
				Instructions    string `json:"instructions"`
			}
			r := s.post(rpc(1, "initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
				"clientInfo": map[string]any{"name": "t", "version": "1"}}), "Mcp-Protocol-Version", l.header)
			lane{name: l.name}.result(t, r, &init)
			if init.ProtocolVersion != "2025-06-18" || !strings.Contains(init.Instructions, "claim_task") {
				t.Fatalf("initialize: %+v", init)
			}

			l.result(t, l.call(s, 2, "ping", "", nil), nil)

			var disc struct {
				SupportedVersions []string       `json:"supportedVersions"`
				Capabilities      map[string]any `json:"capabilities"`
				ServerInfo        struct{ Name string }
				Instructions      string `json:"instructions"`
			}
			fields := l.result(t, l.call(s, "three", "server/discover", "", nil), &disc)
			if strings.Join(disc.SupportedVersions, " ") != "2026-07-28 2025-11-25 2025-06-18 2025-03-26" ||
				disc.Capabilities["tools"] == nil || disc.ServerInfo.Name != "tessera" || !strings.Contains(disc.Instructions, "heartbeat") {
				t.Fatalf("discover: %+v", disc)
			}
			wantCacheHints(t, l, fields)

			var list struct {
				Tools []struct {
					Name         string         `json:"name"`
					Description  string         `json:"description"`
					InputSchema  map[string]any `json:"inputSchema"`
					OutputSchema map[string]any `json:"outputSchema"`
					Annotations  map[string]any `json:"annotations"`
				} `json:"tools"`
			}
			fields = l.result(t, l.call(s, 4, "tools/list", "", nil), &list)
			wantCacheHints(t, l, fields)
			if len(list.Tools) != len(ops.Tools()) {
				t.Fatalf("%d tools", len(list.Tools))
			}
			for _, tool := range list.Tools {
				props, _ := tool.InputSchema["properties"].(map[string]any)
				// A tool that acts in a namespace takes one; whoami,
				// my_audit and start_session act in none and say so.
				grant := ops.ByTool(tool.Name).Need().Grant || tool.Name == "explain_access_modes"
				if tool.Description == "" || tool.InputSchema["type"] != "object" || (props["namespace"] != nil) != grant ||
					tool.OutputSchema["type"] != "object" || tool.Annotations["openWorldHint"] != false {
					t.Errorf("tool %s: namespace %v, %s", tool.Name, props["namespace"], tool.Description)
				}
			}

			var call toolResult
			l.result(t, l.call(s, 5, "tools/call", "explain_access_modes", map[string]any{"name": "explain_access_modes", "arguments": map[string]any{}}), &call)
			if call.IsError || !strings.Contains(string(call.StructuredContent), "anonymous_session") {
				t.Fatalf("explain_access_modes: %s", call.StructuredContent)
			}

			status := http.StatusOK
			if l.modern {
				status = http.StatusNotFound // 2026-07-28: an unknown method is 404
			}
			wantRPCError(t, l.call(s, 6, "resources/list", "", nil), status, -32601)
		})
	}
}

func wantCacheHints(t *testing.T, l lane, fields map[string]any) {
	t.Helper()
	_, hasTTL := fields["ttlMs"]
	if l.modern != hasTTL || (l.modern && (fields["ttlMs"] != float64(300000) || fields["cacheScope"] != "public")) {
		t.Fatalf("%s: ttlMs %v cacheScope %v", l.name, fields["ttlMs"], fields["cacheScope"])
	}
}

// initialize echoes a handshake revision it speaks, and answers the newest
// otherwise (2026-07-28 has no handshake).
func TestInitializeNegotiates(t *testing.T) {
	s := start(t)
	for requested, want := range map[string]string{"2025-11-25": "2025-11-25", "2025-03-26": "2025-03-26",
		"2024-11-05": "2025-11-25", "2026-07-28": "2025-11-25", "1900-01-01": "2025-11-25"} {
		var init struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		lanes[0].result(t, s.post(rpc(1, "initialize", map[string]any{"protocolVersion": requested})), &init)
		if init.ProtocolVersion != want {
			t.Errorf("initialize %s answered %s, want %s", requested, init.ProtocolVersion, want)
		}
	}
	wantRPCError(t, s.post(rpc(1, "initialize", map[string]any{"protocolVersion": 7})), 200, -32602)
	wantRPCError(t, s.post(rpc(1, "initialize", nil)), 200, -32602)
}

// Notifications and responses get 202 and no body, on every lane, alone
// or batched together.
func TestNotificationsAccepted(t *testing.T) {
	s := start(t)
	for _, l := range lanes {
		for _, body := range []any{
			rpc(nil, "notifications/initialized", nil),
			rpc(nil, "notifications/cancelled", map[string]any{"requestId": 1}),
			map[string]any{"jsonrpc": "2.0", "id": 9, "result": map[string]any{}},
			[]any{rpc(nil, "notifications/initialized", nil), map[string]any{"jsonrpc": "2.0", "id": "x", "error": map[string]any{"code": 1, "message": "m"}}},
		} {
			r := s.post(body, "Mcp-Protocol-Version", l.header)
			if r.Status != http.StatusAccepted || len(r.Body) != 0 {
				t.Fatalf("%s: %v answered %d %q", l.name, body, r.Status, r.Body)
			}
		}
	}
}

// A batch runs in order on every lane; notifications in it get no
// answer, errors stay in their place.
func TestBatchesOnEveryLane(t *testing.T) {
	s := start(t)
	for _, l := range lanes {
		r := s.post([]any{
			l.request(1, "ping", nil),
			rpc(nil, "notifications/initialized", nil),
			l.request("two", "tools/list", nil),
			l.request(3, "tools/call", map[string]any{"name": "explain_access_modes", "arguments": map[string]any{"namespace": "build-farm"}}),
			l.request(4, "no/such", nil),
			map[string]any{"jsonrpc": "1.0", "id": 5, "method": "ping"},
		}, "Mcp-Protocol-Version", l.header)
		if r.Status != http.StatusOK {
			t.Fatalf("%s: %d %s", l.name, r.Status, r.Body)
		}
		out := r.batch(t)
		if len(out) != 5 {
			t.Fatalf("%s: %d answers: %s", l.name, len(out), r.Body)
		}
		for i, want := range []string{"1", `"two"`, "3", "4", "5"} {
			if string(out[i].ID) != want {
				t.Fatalf("%s: answer %d has id %s, want %s", l.name, i, out[i].ID, want)
			}
		}
		if out[0].Error != nil || out[1].Error != nil || out[3].Error.Code != -32601 || out[4].Error.Code != -32600 {
			t.Fatalf("%s: %s", l.name, r.Body)
		}
		if tr := out[2].tool(t); tr.IsError || !strings.Contains(string(tr.StructuredContent), "namespace:build-farm") {
			t.Fatalf("%s: %s", l.name, tr.StructuredContent)
		}
	}
}

// Each JSON-RPC error code, for what it means.
func TestJSONRPCErrors(t *testing.T) {
	s := start(t)
	for _, tc := range []struct {
		name   string
		body   string
		status int
		code   int
		id     string
	}{
		{"not JSON", `{"jsonrpc":`, 400, -32700, "null"},
		{"empty body", ``, 400, -32700, "null"},
		{"not UTF-8", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\xffing\"}", 400, -32700, "null"},
		{"not an object", `7`, 400, -32600, "null"},
		{"empty batch", `[]`, 400, -32600, "null"},
		{"no jsonrpc", `{"id":1,"method":"ping"}`, 400, -32600, "1"},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, 400, -32600, "null"},
		{"fractional id", `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, 400, -32600, "null"},
		{"object id", `{"jsonrpc":"2.0","id":{},"method":"ping"}`, 400, -32600, "null"},
		{"unknown member", `{"jsonrpc":"2.0","id":1,"method":"ping","extra":1}`, 400, -32600, "1"},
		{"no method", `{"jsonrpc":"2.0","id":1}`, 400, -32600, "1"},
		{"params an array", `{"jsonrpc":"2.0","id":1,"method":"ping","params":[1]}`, 400, -32602, "1"},
		{"unknown method", `{"jsonrpc":"2.0","id":"m","method":"prompts/list"}`, 200, -32601, `"m"`},
		{"call without a name", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"arguments":{}}}`, 200, -32602, "2"},
		{"unknown tool", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"rm_rf","arguments":{}}}`, 200, -32602, "2"},
		{"arguments not an object", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"explain_access_modes","arguments":[1]}}`, 200, -32602, "2"},
		{"cursor on the one page", `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"cursor":"p2"}}`, 200, -32602, "3"},
	} {
		res := wantRPCError(t, s.post(tc.body), tc.status, tc.code)
		if string(res.ID) != tc.id {
			t.Errorf("%s: id %s, want %s", tc.name, res.ID, tc.id)
		}
	}
	// Request ids are strings or integers, echoed as sent.
	for _, id := range []string{`0`, `-12`, `9007199254740993`, `"a b"`, `""`} {
		r := s.post(`{"jsonrpc":"2.0","id":` + id + `,"method":"ping"}`)
		if res := r.one(t); res.Error != nil || string(res.ID) != id {
			t.Errorf("id %s answered %s", id, r.Body)
		}
	}
}

// The revision's own refusals: an unsupported version by header or by
// _meta, a missing _meta field, and headers that disagree with the body.
func TestModernLaneRefusals(t *testing.T) {
	s := start(t)
	modern := lanes[len(lanes)-1]
	call := map[string]any{"name": "explain_access_modes", "arguments": map[string]any{}}

	r := wantRPCError(t, s.post(rpc(1, "ping", nil), "Mcp-Protocol-Version", "1900-01-01"), 400, -32022)
	var data struct {
		Supported []string `json:"supported"`
		Requested string   `json:"requested"`
	}
	if json.Unmarshal(r.Error.Data, &data) != nil || len(data.Supported) != 4 || data.Requested != "1900-01-01" {
		t.Fatalf("unsupported version data: %s", r.Error.Data)
	}
	meta := modernMeta()
	meta["io.modelcontextprotocol/protocolVersion"] = "2099-01-01"
	wantRPCError(t, s.post(rpc(1, "ping", map[string]any{"_meta": meta}), modern.headers("ping", "")...), 400, -32022)

	// Missing required _meta fields are invalid params.
	wantRPCError(t, s.post(rpc(1, "ping", nil), modern.headers("ping", "")...), 400, -32602)
	wantRPCError(t, s.post(rpc(1, "ping", map[string]any{"_meta": map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}),
		modern.headers("ping", "")...), 400, -32602)

	// _meta without the version header, or naming another version.
	wantRPCError(t, s.post(modern.request(1, "ping", nil), "Mcp-Method", "ping"), 400, -32020)
	wantRPCError(t, s.post(modern.request(1, "ping", nil), "Mcp-Protocol-Version", "2025-06-18", "Mcp-Method", "ping"), 400, -32020)

	// Mcp-Method and Mcp-Name must be there and match the body.
	wantRPCError(t, s.post(modern.request(1, "ping", nil), "Mcp-Protocol-Version", "2026-07-28"), 400, -32020)
	wantRPCError(t, modern.call(s, 1, "ping", "", nil, "Mcp-Method", "tools/list"), 400, -32020)
	wantRPCError(t, s.post(modern.request(1, "tools/call", call), "Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call"), 400, -32020)
	wantRPCError(t, modern.call(s, 1, "tools/call", "whoami", call), 400, -32020)
	// The headers may not disagree on the 2025 lanes either.
	wantRPCError(t, s.post(rpc(1, "tools/call", call), "Mcp-Name", "start_session"), 400, -32020)
	// A batch carries no per-message headers.
	wantRPCError(t, s.post([]any{rpc(1, "ping", nil)}, "Mcp-Method", "ping"), 400, -32020)

	// Mcp-Name may come base64-encoded, as the revision allows.
	encoded := "=?base64?" + base64.StdEncoding.EncodeToString([]byte("explain_access_modes")) + "?="
	var res toolResult
	modern.result(t, s.post(modern.request(1, "tools/call", call), "Mcp-Protocol-Version", "2026-07-28",
		"Mcp-Method", "tools/call", "Mcp-Name", encoded), &res)
	if res.IsError {
		t.Fatalf("base64 Mcp-Name: %s", res.StructuredContent)
	}
}

// GET and DELETE have nothing to serve on a stateless endpoint.
func TestOnlyPost(t *testing.T) {
	s := start(t)
	for _, method := range []string{"GET", "DELETE", "PUT"} {
		r := s.send(method, "/mcp", nil)
		if r.Status != http.StatusMethodNotAllowed || r.Header.Get("Allow") != "POST" {
			t.Errorf("%s /mcp: %d Allow %q", method, r.Status, r.Header.Get("Allow"))
		}
	}
}

// Origin, when sent, is the public origin or a loopback one.
func TestOrigin(t *testing.T) {
	s := start(t)
	for origin, want := range map[string]int{
		"http://127.0.0.1:8787": 200, "http://localhost:6274": 200, "https://127.0.0.2": 200, "http://[::1]:3000": 200,
		"https://evil.example": 403, "null": 403, "http://127.0.0.1.evil.example": 403, "file://": 403,
	} {
		r := s.post(rpc(1, "ping", nil), "Origin", origin)
		if r.Status != want {
			t.Errorf("Origin %s: %d, want %d: %s", origin, r.Status, want, r.Body)
		}
		if want == 403 && !strings.Contains(string(r.Body), `"code":"forbidden"`) {
			t.Errorf("Origin %s: %s", origin, r.Body)
		}
	}
}

// The byte limit bounds a batch before anything is read of it; the count
// bound keeps the answer bounded too.
func TestOversizedBatch(t *testing.T) {
	s := start(t)
	ping := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	big := "[" + strings.Repeat(ping+",", (1<<20)/len(ping)) + ping + "]"
	r := s.post(big)
	if r.Status != http.StatusRequestEntityTooLarge || !strings.Contains(string(r.Body), `"code":"payload_too_large"`) {
		t.Fatalf("a %d-byte batch: %d %s", len(big), r.Status, r.Body)
	}
	many := "[" + strings.Repeat(ping+",", 100) + ping + "]"
	wantRPCError(t, s.post(many), 400, -32600)
	r = s.post("[" + strings.Repeat(ping+",", 99) + ping + "]")
	if out := r.batch(t); len(out) != 100 {
		t.Fatalf("a batch of 100: %d answers", len(out))
	}
}

// No request draws an answer far larger than itself: a keyless batch of
// 100 tools/list gets the list once and 99 refusals, and its answer stays
// within 20 times the request plus the one list (it was 5.6 MB for 5.4 KB).
func TestBatchAmplificationIsBounded(t *testing.T) {
	s := start(t)
	one := s.post(rpc(1, "tools/list", nil))
	var batch []map[string]any
	for i := range 100 {
		batch = append(batch, rpc(i, "tools/list", nil))
	}
	body, _ := json.Marshal(batch)
	r := s.post(string(body))
	var answers []struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.Body, &answers); err != nil || len(answers) != 100 {
		t.Fatalf("batch: %d %.300s", r.Status, r.Body)
	}
	lists := 0
	for _, a := range answers {
		switch {
		case a.Result != nil:
			lists++
		case a.Error == nil || a.Error.Code != -32600 || !strings.Contains(a.Error.Message, "once per batch"):
			t.Errorf("a repeat answered %+v", a.Error)
		}
	}
	if lists != 1 {
		t.Errorf("%d tool lists in one batch, want 1", lists)
	}
	if bound := 20*len(body) + len(one.Body); len(r.Body) > bound {
		t.Errorf("a %d-byte batch drew %d bytes, over %d", len(body), len(r.Body), bound)
	}
}
