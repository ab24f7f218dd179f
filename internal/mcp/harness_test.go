package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/app"
	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/httpapi"
	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/store/postgres/pgtest"
	"github.com/tessera-dev/tessera/internal/tessera"
)

const adminKey = "tsk_mcpadmin_abcdefghijklmnopqrstuvwxyz012345"

// server is a real Tessera server (internal/app, as `tessera serve` wires
// it) on a real SQLite file in a temporary directory (or a PostgreSQL
// schema, with TESSERA_TEST_STORE=postgres), over loopback HTTP.
type server struct {
	t     testing.TB
	URL   string
	App   *app.App
	Clock *tessera.ManualClock
}

func start(t testing.TB) *server { return startWith(t, func(*app.Options) {}) }

// startWith is start with options of the test's choosing.
func startWith(t testing.TB, configure func(*app.Options)) *server {
	t.Helper()
	clock := tessera.NewManualClock(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC))
	o := app.Options{DataDir: t.TempDir(), Clock: clock, Core: core.DefaultConfig(),
		AdminKey: adminKey, HTTP: httpapi.Config{PublicURL: "http://127.0.0.1:8787", Version: "test"}}
	if os.Getenv("TESSERA_TEST_STORE") == "postgres" {
		// `make test` runs the tasks extension's tests again on PostgreSQL.
		o.Store = pgtest.Schema(t)
	}
	configure(&o)
	a, err := app.Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(a.API)
	t.Cleanup(func() {
		a.Core.Close()
		hs.Close()
		a.Close()
	})
	return &server{t: t, URL: hs.URL, App: a, Clock: clock}
}

// rowsWritten returns the storage rows fn wrote, by the server's meter.
func (s *server) rowsWritten(fn func()) int64 {
	before, _ := s.App.Meter.Lifetime()
	fn()
	after, _ := s.App.Meter.Lifetime()
	return after - before
}

// refuseWrites spends the day's written allowance: storage refuses every
// write from now on.
func (s *server) refuseWrites() {
	s.t.Helper()
	if err := s.App.Meter.SetAllowance(context.Background(), meter.Allowance{RowsWrittenPerDay: 1}); err != nil {
		s.t.Fatal(err)
	}
}

// reply is a finished HTTP exchange with /mcp.
type reply struct {
	Status int
	Header http.Header
	Body   []byte
}

// post sends body (a string as is, anything else as JSON) to POST /mcp
// with the given header name, value pairs.
func (s *server) post(body any, headers ...string) *reply {
	s.t.Helper()
	b, ok := body.(string)
	if !ok {
		j, err := json.Marshal(body)
		if err != nil {
			s.t.Fatal(err)
		}
		b = string(j)
	}
	return s.send("POST", "/mcp", []byte(b), headers...)
}

func (s *server) send(method, path string, body []byte, headers ...string) *reply {
	s.t.Helper()
	h := http.Header{"Content-Type": {"application/json"}}
	for i := 0; i+1 < len(headers); i += 2 {
		h.Set(headers[i], headers[i+1])
	}
	req, err := http.NewRequest(method, s.URL+path, bytes.NewReader(body))
	if err == nil {
		req.Header = h
		var res *http.Response
		if res, err = http.DefaultClient.Do(req); err == nil {
			defer res.Body.Close()
			var out []byte
			if out, err = io.ReadAll(res.Body); err == nil {
				return &reply{Status: res.StatusCode, Header: res.Header, Body: out}
			}
		}
	}
	s.t.Fatal(err)
	return nil
}

// newKey makes an agent principal with a key holding scopes, through the
// HTTP admin routes.
func (s *server) newKey(scopes ...string) string {
	s.t.Helper()
	var p tessera.Principal
	s.admin("/v1/admin/principals", map[string]any{"kind": "agent", "display_name": "mcp test agent"}, &p)
	var k struct {
		Key string `json:"key"`
	}
	s.admin("/v1/admin/keys", map[string]any{"principal_id": p.ID, "scopes": scopes}, &k)
	return k.Key
}

func (s *server) admin(path string, body, out any) {
	s.t.Helper()
	j, _ := json.Marshal(body)
	r := s.send("POST", path, j, "Authorization", "Bearer "+adminKey)
	if r.Status != http.StatusCreated {
		s.t.Fatalf("POST %s: %d %s", path, r.Status, r.Body)
	}
	if err := json.Unmarshal(r.Body, out); err != nil {
		s.t.Fatal(err)
	}
}

// rpc is a JSON-RPC request body.
func rpc(id any, method string, params map[string]any) map[string]any {
	m := map[string]any{"jsonrpc": "2.0", "method": method}
	if id != nil {
		m["id"] = id
	}
	if params != nil {
		m["params"] = params
	}
	return m
}

// modernMeta is the per-request _meta of a 2026-07-28 request.
func modernMeta() map[string]any {
	return map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{}}
}

// rpcResponse is one JSON-RPC response as the server sent it.
type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

func (r *reply) one(t testing.TB) rpcResponse {
	t.Helper()
	var out rpcResponse
	if err := json.Unmarshal(r.Body, &out); err != nil || out.JSONRPC != "2.0" {
		t.Fatalf("not a JSON-RPC response (%d): %s", r.Status, r.Body)
	}
	return out
}

func (r *reply) batch(t testing.TB) []rpcResponse {
	t.Helper()
	var out []rpcResponse
	if err := json.Unmarshal(r.Body, &out); err != nil {
		t.Fatalf("not a batch answer (%d): %s", r.Status, r.Body)
	}
	return out
}

// wantRPCError fails unless r is an HTTP status answer holding one
// JSON-RPC error with code.
func wantRPCError(t testing.TB, r *reply, status, code int) rpcResponse {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	res := r.one(t)
	if res.Error == nil || res.Error.Code != code || res.Error.Message == "" {
		t.Fatalf("want JSON-RPC error %d, got %s", code, r.Body)
	}
	return res
}

// toolResult is a tools/call result.
type toolResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	IsError           bool            `json:"isError"`
	ResultType        string          `json:"resultType"`
}

func (res rpcResponse) tool(t testing.TB) toolResult {
	t.Helper()
	var tr toolResult
	if res.Error != nil || json.Unmarshal(res.Result, &tr) != nil || len(tr.Content) != 1 {
		t.Fatalf("not a tool result: %+v %s", res.Error, res.Result)
	}
	if tr.Content[0].Type != "text" || !jsonEqual(tr.Content[0].Text, string(tr.StructuredContent)) {
		t.Fatalf("the text content is not the structured content: %s", res.Result)
	}
	return tr
}

func jsonEqual(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return bytes.Equal(ja, jb)
}

// toolError is the structured content of an isError result.
type toolError struct {
	Status     int        `json:"status"`
	Code       string     `json:"code"`
	Message    string     `json:"message"`
	Field      string     `json:"field"`
	RetryAfter int        `json:"retry_after"`
	ResetAt    *time.Time `json:"reset_at"`
}

func (tr toolResult) err(t testing.TB, status int, code string) toolError {
	t.Helper()
	var e toolError
	if !tr.IsError || json.Unmarshal(tr.StructuredContent, &e) != nil || e.Status != status || e.Code != code || e.Message == "" {
		t.Fatalf("want a tool error %d %s, got %s", status, code, tr.StructuredContent)
	}
	return e
}
