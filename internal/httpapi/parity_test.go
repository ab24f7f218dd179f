package httpapi_test

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/httpapi"
	"github.com/tessera-dev/tessera/internal/input"
	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/ops"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// outcome is what a call came to, as either transport tells it.
type outcome struct {
	Status     int
	Code       string
	Field      string
	RetryAfter int
	ResetAt    string
}

// viaHTTP sends a tool's call as the HTTP request of the same operation:
// arguments go where the operation's input says HTTP finds them (the
// path, the query, a header, the body), namespace in the path's prefix.
func (s *testServer) viaHTTP(t *testing.T, key, tool string, args map[string]any) outcome {
	t.Helper()
	o := ops.ByTool(tool)
	if o == nil || o.HTTP == nil {
		t.Fatalf("%s: no HTTP route", tool)
	}
	path, query, body, headers := o.HTTP.Path, url.Values{}, map[string]any{}, []string{}
	for name, v := range args {
		if name == "namespace" {
			path = "/ns/" + url.PathEscape(fmt.Sprint(v)) + path
			continue
		}
		f := o.Input().Field(name)
		text := fmt.Sprint(v)
		switch {
		case f == nil || f.In == input.InBody:
			body[name] = v
		case f.In == input.InPath:
			path = strings.Replace(path, "{"+name+"}", url.PathEscape(text), 1)
		case f.In == input.InQuery:
			query.Set(name, text)
		case f.In == input.InHeader:
			headers = append(headers, f.Header, text)
		}
	}
	if len(query) > 0 {
		path += "?" + query.Encode()
	}
	var sent any
	if len(body) > 0 {
		sent = body
	}
	r := s.do(o.HTTP.Method, path, key, sent, headers...)
	out := outcome{Status: r.Status}
	if r.Status < 400 {
		return outcome{Status: 200}
	}
	var e httpapi.ErrorBody
	if err := json.Unmarshal(r.Body, &e); err != nil {
		t.Fatalf("%s %s: %d %s", o.HTTP.Method, path, r.Status, r.Body)
	}
	out.Code = string(e.Error.Code)
	if d := e.Error.Details; d != nil {
		out.Field, out.RetryAfter = d.Field, d.RetryAfter
		if d.ResetAt != nil {
			out.ResetAt = d.ResetAt.Format(time.RFC3339)
		}
		for _, f := range o.Input().Fields {
			if f.In == input.InHeader && f.Header == d.Field {
				out.Field = f.Name // the header as MCP names its argument
			}
		}
	}
	return out
}

// viaMCP calls the tool through POST /mcp.
func (s *testServer) viaMCP(t *testing.T, key, tool string, args map[string]any) outcome {
	t.Helper()
	msg := map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": args}}
	r := s.do("POST", "/mcp", key, msg)
	if r.Status != 200 {
		// Refused before any JSON-RPC work (SPEC §11): a plain HTTP error.
		var e httpapi.ErrorBody
		if err := json.Unmarshal(r.Body, &e); err != nil {
			t.Fatalf("%s over MCP: %d %s", tool, r.Status, r.Body)
		}
		return outcome{Status: r.Status, Code: string(e.Error.Code)}
	}
	var res struct {
		Result struct {
			IsError           bool        `json:"isError"`
			StructuredContent ops.Problem `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal(r.Body, &res); err != nil || r.Status != 200 {
		t.Fatalf("%s over MCP: %d %s", tool, r.Status, r.Body)
	}
	if !res.Result.IsError {
		return outcome{Status: 200}
	}
	p := res.Result.StructuredContent
	out := outcome{Status: p.Status, Code: p.Code, Field: p.Field, RetryAfter: p.RetryAfter}
	if p.ResetAt != nil {
		out.ResetAt = p.ResetAt.Format(time.RFC3339)
	}
	return out
}

// parity is one call that must come to the same outcome on both
// transports, and to want.
type parity struct {
	name, key, tool string
	args            map[string]any
	want            outcome
}

func (s *testServer) checkParity(t *testing.T, cases []parity) {
	t.Helper()
	for _, c := range cases {
		h := s.viaHTTP(t, c.key, c.tool, c.args)
		m := s.viaMCP(t, c.key, c.tool, c.args)
		if h != m {
			t.Errorf("%s: HTTP %+v, MCP %+v", c.name, h, m)
		}
		if h != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, h, c.want)
		}
	}
}

func invalid(field string) outcome {
	return outcome{Status: 400, Code: "invalid_request", Field: field}
}

// The same bad input gets the same status, code and field over HTTP and
// over MCP, whichever operation it is sent to: both are decoded into the
// operation's one input type and held to its one set of bounds.
func TestTransportParity(t *testing.T) {
	s := newTestServer(t)
	reader, _ := s.newKey("agent", "namespace:main", "read")
	mainOnly, _ := s.newKey("agent", "namespace:main", "read", "enqueue", "claim", "write")
	task := s.enqueue("main", adminKey, map[string]any{"title": "parity"})
	long := strings.Repeat("x", 300)
	cases := []parity{
		// numbers out of range, and of the wrong type
		{"lease too short", adminKey, "claim_task", map[string]any{"lease_seconds": 5}, invalid("lease_seconds")},
		{"lease too long", adminKey, "claim_task", map[string]any{"lease_seconds": 3601}, invalid("lease_seconds")},
		{"wait too long", adminKey, "claim_task", map[string]any{"wait_seconds": 21}, invalid("wait_seconds")},
		{"lease not a number", adminKey, "claim_task", map[string]any{"lease_seconds": "ten"}, invalid("lease_seconds")},
		{"a batch claim past its bound", adminKey, "claim_tasks", map[string]any{"max": 101}, invalid("max")},
		{"a batch claim's lease too short", adminKey, "claim_tasks", map[string]any{"max": 2, "lease_seconds": 5}, invalid("lease_seconds")},
		{"a batch submit of nothing", adminKey, "submit_tasks", map[string]any{"items": []any{}}, invalid("items")},
		{"a batch submit item of neither outcome", adminKey, "submit_tasks", map[string]any{"items": []any{
			map[string]any{"task_id": task.ID, "lease_token": "t", "outcome": "maybe"}}}, invalid("items[0].outcome")},
		{"a batch submit item without its task", adminKey, "submit_tasks", map[string]any{"items": []any{
			map[string]any{"lease_token": "t", "outcome": "succeeded"}}}, invalid("items[0].task_id")},
		{"a batch submit of a stale token", adminKey, "submit_tasks", map[string]any{"items": []any{
			map[string]any{"task_id": task.ID, "lease_token": "stale", "outcome": "succeeded"}}}, outcome{Status: 200}},
		{"priority out of range", adminKey, "enqueue_task", map[string]any{"title": "t", "priority": 10_000_000}, invalid("priority")},
		{"max_attempts zero", adminKey, "enqueue_task", map[string]any{"title": "t", "max_attempts": 0}, invalid("max_attempts")},
		{"limit zero", adminKey, "list_tasks", map[string]any{"limit": 0}, invalid("limit")},
		{"limit past the page", adminKey, "list_tasks", map[string]any{"limit": 201}, invalid("limit")},
		{"limit not a number", adminKey, "list_tasks", map[string]any{"limit": "many"}, invalid("limit")},
		{"events wait too long", adminKey, "claim_events", map[string]any{"task_id": task.ID, "wait": 31}, invalid("wait")},
		{"version zero", adminKey, "read_record", map[string]any{"bucket": "b", "key": "k", "version": 0}, invalid("version")},
		{"if_version negative", adminKey, "write_record", map[string]any{"bucket": "b", "key": "k", "value": 1, "if_version": -1}, invalid("if_version")},
		// strings too long, of the wrong shape, missing, or unknown
		{"title missing", adminKey, "enqueue_task", map[string]any{"brief": "b"}, invalid("title")},
		{"title too long", adminKey, "enqueue_task", map[string]any{"title": long}, invalid("title")},
		{"title on two lines", adminKey, "enqueue_task", map[string]any{"title": "a\nb"}, invalid("title")},
		{"title not a string", adminKey, "enqueue_task", map[string]any{"title": 7}, invalid("title")},
		{"a bad label", adminKey, "enqueue_task", map[string]any{"title": "t", "labels": []string{"no spaces"}}, invalid("labels")},
		{"a bad queue", adminKey, "enqueue_task", map[string]any{"title": "t", "queue": "a/b"}, invalid("queue")},
		{"an unknown field", adminKey, "enqueue_task", map[string]any{"title": "t", "nope": 1}, invalid("nope")},
		{"an unknown state", adminKey, "list_tasks", map[string]any{"state": "sleeping"}, invalid("state")},
		{"a cursor too long", adminKey, "list_tasks", map[string]any{"cursor": long}, invalid("cursor")},
		{"an outcome of neither", adminKey, "submit_task", map[string]any{"task_id": task.ID, "lease_token": "t", "outcome": "maybe"}, invalid("outcome")},
		{"an idempotency key too long", adminKey, "enqueue_task", map[string]any{"title": "t", "idempotency_key": long}, invalid("idempotency_key")},
		{"a bad bucket", adminKey, "write_record", map[string]any{"bucket": "no spaces", "key": "k", "value": 1}, invalid("bucket")},
		{"a bad record key", adminKey, "read_record", map[string]any{"bucket": "b", "key": "a+b"}, invalid("key")},
		{"a bad note", adminKey, "add_note", map[string]any{"task_id": task.ID, "body": ""}, invalid("body")},
		// ids of no shape an id has, and ids of nothing
		{"a task id of the wrong shape", adminKey, "get_task", map[string]any{"task_id": "not-an-id"}, outcome{Status: 404, Code: "not_found"}},
		{"a task that does not exist", adminKey, "get_task", map[string]any{"task_id": "01ARZ3NDEKTSV4RRFFQ69G5FAV"}, outcome{Status: 404, Code: "not_found"}},
		{"a stale lease token", adminKey, "heartbeat", map[string]any{"task_id": task.ID, "lease_token": "stale"}, outcome{Status: 409, Code: "lease_lost"}},
		{"a lease token too long", adminKey, "release_task", map[string]any{"task_id": task.ID, "lease_token": long}, outcome{Status: 409, Code: "lease_lost"}},
		// scope and namespace
		{"no enqueue scope", reader, "enqueue_task", map[string]any{"title": "t"}, outcome{Status: 403, Code: "forbidden"}},
		{"no claim scope", reader, "claim_task", map[string]any{}, outcome{Status: 403, Code: "forbidden"}},
		{"no claim scope for a batch", reader, "claim_tasks", map[string]any{"max": 5}, outcome{Status: 403, Code: "forbidden"}},
		{"no claim scope for a batch submit", reader, "submit_tasks", map[string]any{"items": []any{
			map[string]any{"task_id": task.ID, "lease_token": "t", "outcome": "succeeded"}}}, outcome{Status: 403, Code: "forbidden"}},
		{"another namespace", mainOnly, "counts", map[string]any{"namespace": "other"}, outcome{Status: 403, Code: "forbidden"}},
		{"a malformed namespace", adminKey, "counts", map[string]any{"namespace": "Bad_NS"}, invalid("namespace")},
		{"no key", "", "counts", map[string]any{}, outcome{Status: 401, Code: "unauthorized"}},
		{"a key of nothing", "tsk_nosuchkey_abcdefghijklmnopqrstuvwxyz0123", "counts", map[string]any{}, outcome{Status: 401, Code: "unauthorized"}},
		// the fleet's fields and settings (issue 31)
		{"a requirement of the wrong shape", adminKey, "enqueue_task", map[string]any{"title": "t", "requires": []string{"GPU"}}, invalid("requires")},
		{"too many requirements", adminKey, "enqueue_task", map[string]any{"title": "t", "requires": strings.Split("a b c d e f g h i j k l m n o p q", " ")}, invalid("requires")},
		{"a group too long", adminKey, "enqueue_task", map[string]any{"title": "t", "group": long}, invalid("group")},
		{"a group on two lines", adminKey, "enqueue_task", map[string]any{"title": "t", "group": "a\nb"}, invalid("group")},
		{"a capability of the wrong shape", adminKey, "claim_task", map[string]any{"capabilities": []string{"has space"}}, invalid("capabilities")},
		{"a batch claim's capability", adminKey, "claim_tasks", map[string]any{"max": 2, "capabilities": []string{""}}, invalid("capabilities")},
		{"a cooldown too long", adminKey, "submit_task", map[string]any{"task_id": task.ID, "lease_token": "t", "outcome": "failed", "cooldown_seconds": 86401}, invalid("cooldown_seconds")},
		{"a negative group cap", adminKey, "set_queue_settings", map[string]any{"queue": "q", "group_max_running": -1}, invalid("group_max_running")},
		{"a rate past its bound", adminKey, "set_queue_settings", map[string]any{"queue": "q", "rate": map[string]any{"per_second": 1e9}}, invalid("rate.per_second")},
		{"a rate of the wrong type", adminKey, "set_group_settings", map[string]any{"queue": "q", "group": "g", "rate": map[string]any{"per_second": "fast"}}, invalid("rate.per_second")},
		{"a group's settings without the scope", reader, "set_group_settings", map[string]any{"queue": "q", "group": "g"}, outcome{Status: 403, Code: "forbidden"}},
		// gates (issue 39)
		{"a gate without its key", adminKey, "open_gate", map[string]any{"task_id": task.ID, "lease_token": "t", "message": "m"}, invalid("key")},
		{"a gate of a stale token", adminKey, "open_gate", map[string]any{"task_id": task.ID, "lease_token": "stale", "key": "k", "message": "m"}, outcome{Status: 409, Code: "lease_lost"}},
		{"a gate of an unknown kind", adminKey, "open_gate", map[string]any{"task_id": task.ID, "lease_token": "t", "key": "k", "message": "m", "kind": "quiz"}, invalid("kind")},
		{"a gate's timeout past 30 days", adminKey, "open_gate", map[string]any{"task_id": task.ID, "lease_token": "t", "key": "k", "message": "m", "timeout_seconds": 2_592_001}, invalid("timeout_seconds")},
		{"too many gates", adminKey, "open_gate", map[string]any{"task_id": task.ID, "lease_token": "t", "gates": make([]map[string]any, 17)}, invalid("gates")},
		{"a gate in a list without its message", adminKey, "open_gate", map[string]any{"task_id": task.ID, "lease_token": "t", "gates": []map[string]any{{"key": "k"}}}, invalid("gates[0].message")},
		{"an enqueue with a gate of no message", adminKey, "enqueue_task", map[string]any{"title": "t", "gates": []map[string]any{{"key": "k"}}}, invalid("gates[0].message")},
		{"an answer of no action", adminKey, "answer_gate", map[string]any{"task_id": task.ID, "key": "k"}, invalid("action")},
		{"an answer to a gate of nothing", adminKey, "answer_gate", map[string]any{"task_id": task.ID, "key": "k", "action": "accept"}, outcome{Status: 404, Code: "not_found"}},
		{"an answer without enqueue", reader, "answer_gate", map[string]any{"task_id": task.ID, "key": "k", "action": "accept"}, outcome{Status: 403, Code: "forbidden"}},
		// and what works, works on both
		{"a good read", reader, "get_task", map[string]any{"task_id": task.ID}, outcome{Status: 200}},
		{"a claim with capabilities", adminKey, "claim_task", map[string]any{"queue": "nothing-here", "capabilities": []string{"gpu", "repo:x/y"}}, outcome{Status: 200}},
		{"a fleet view", reader, "queue_fleet", map[string]any{"queue": "q"}, outcome{Status: 200}},
	}
	s.checkParity(t, cases)

	// A spent storage allowance: every write is refused alike, with when
	// it is expected to reset.
	spendAllowance(t, s)
	reset := meter.NextReset(s.Clock.Now())
	s.checkParity(t, []parity{
		{"allowance spent", adminKey, "enqueue_task", map[string]any{"title": "t"}, outcome{Status: 503, Code: "storage_quota_exhausted",
			RetryAfter: int(math.Ceil(reset.Sub(s.Clock.Now()).Seconds())), ResetAt: reset.Format(time.RFC3339)}},
	})
}

// A session's spent request quota is 429 on both transports.
func TestTransportParityQuota(t *testing.T) {
	s, _ := newSessionServer(t, t.TempDir(), tessera.NewManualClock(time.Now()), core.SessionConfig{PerAddress: 10, PerHour: 1000, Requests: 2})
	sess := s.mint("198.51.100.9")
	ns := map[string]any{"namespace": sess.Namespace}
	s.checkParity(t, []parity{
		{"within the quota", sess.Key, "counts", ns, outcome{Status: 200}}, // one call each way: the quota of 2 spent
		{"quota spent", sess.Key, "counts", ns, outcome{Status: 429, Code: "rate_limited", RetryAfter: int(core.SessionLifetime.Seconds())}},
	})
}

// A full disk is 503 unavailable with the same retry hint on both
// transports (MCP once mapped it to internal).
func TestTransportParityFullDisk(t *testing.T) {
	sqliteOnly(t)
	disk := smallDisk(t, 4<<20)
	dir := filepath.Join(disk, "data")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	s, _ := serverAt(t, dir, tessera.NewManualClock(time.Now()))
	s.enqueue("main", adminKey, map[string]any{"title": "before"})
	fill(t, disk)
	big := map[string]any{"title": "full", "payload": strings.Repeat("p", 200<<10)}
	s.checkParity(t, []parity{
		{"disk full", adminKey, "enqueue_task", big, outcome{Status: 503, Code: "unavailable", RetryAfter: 30}},
	})
}
