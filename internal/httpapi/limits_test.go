package httpapi_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tessera-dev/tessera/internal/tessera"
)

// Byte limits and malformed input (SPEC §5): every refusal is the error
// body with the right code, and a bad field is named in details.field.

// nested returns a task body whose payload nests so that the whole body is
// depth levels deep (the body object itself is level 1).
func nested(depth int) string {
	return `{"title":"deep","payload":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`
}

func TestLimitsBodyTooLarge(t *testing.T) {
	s := newTestServer(t)
	big := `{"title":"x","brief":"` + strings.Repeat("a", 1<<20) + `"}`

	// With a Content-Length: refused before reading.
	for _, path := range []string{"/v1/tasks", "/v1/claims", "/ns/alpha/v1/tasks", "/v1/nope"} {
		wantError(t, s.do("POST", path, adminKey, big), 413, "payload_too_large", "")
	}
	// Chunked (no Content-Length: the client cannot know the length of a
	// MultiReader): refused once the limit is crossed.
	req, err := http.NewRequest("POST", s.URL+"/v1/tasks", io.MultiReader(strings.NewReader(big)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminKey)
	if req.ContentLength != 0 {
		t.Fatalf("the request would carry a Content-Length of %d", req.ContentLength)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	wantError(t, &response{Status: res.StatusCode, Header: res.Header, Body: b}, 413, "payload_too_large", "")

	// Exactly at the limit is not too large (it is then judged on its
	// fields: the brief is over 64 KiB).
	atLimit := `{"title":"x","brief":"` + strings.Repeat("a", 1<<20-len(`{"title":"x","brief":""}`)) + `"}`
	if len(atLimit) != 1<<20 {
		t.Fatalf("body of %d bytes", len(atLimit))
	}
	wantError(t, s.do("POST", "/v1/tasks", adminKey, atLimit), 400, "invalid_request", "brief")
	if ids := s.listIDs("main", adminKey, ""); len(ids) != 0 {
		t.Fatalf("refused bodies created tasks: %v", ids)
	}
}

func TestLimitsMalformedBodies(t *testing.T) {
	s := newTestServer(t)
	task := s.enqueue("main", adminKey, map[string]any{"queue": "held"})
	c := s.claim("main", adminKey, "held")
	submitPath := "/v1/claims/" + task.ID + "/submit"
	tok := c.Lease.Token

	cases := []struct {
		name   string
		method string
		path   string
		body   any // string: raw bytes
		field  string
	}{
		{"depth 33", "POST", "/v1/tasks", nested(33), ""},
		{"depth 33 in claims", "POST", "/v1/claims", `{"queue":` + strings.Repeat("[", 32) + strings.Repeat("]", 32) + `}`, ""},
		{"unknown field", "POST", "/v1/tasks", `{"title":"x","colour":"red"}`, "colour"},
		{"unknown field in claims", "POST", "/v1/claims", `{"queue":"q","wait":1}`, "wait"},
		{"unknown field in cancel", "POST", "/v1/tasks/" + task.ID + "/cancel", `{"reason":"x"}`, "reason"},
		{"wrong type", "POST", "/v1/tasks", `{"title":"x","priority":"high"}`, "priority"},
		{"wrong type string", "POST", "/v1/tasks", `{"title":7}`, "title"},
		{"wrong type bool", "POST", "/v1/tasks", `{"title":"x","public":"yes"}`, "public"},
		{"wrong type labels", "POST", "/v1/tasks", `{"title":"x","labels":"a"}`, "labels"},
		{"fractional int", "POST", "/v1/claims", `{"lease_seconds":30.5}`, "lease_seconds"},
		{"not an object", "POST", "/v1/tasks", `["title"]`, ""},
		{"bare string", "POST", "/v1/tasks", `"title"`, ""},
		{"invalid UTF-8", "POST", "/v1/tasks", "{\"title\":\"\xff\xfe\"}", ""},
		{"invalid UTF-8 in payload", "POST", "/v1/tasks", "{\"title\":\"x\",\"payload\":{\"k\":\"\xc3\"}}", ""},
		{"trailing garbage", "POST", "/v1/tasks", `{"title":"x"} garbage`, ""},
		{"trailing object", "POST", "/v1/tasks", `{"title":"x"}{"title":"y"}`, ""},
		{"truncated", "POST", "/v1/tasks", `{"title":"x"`, ""},
		{"syntax", "POST", "/v1/tasks", `{title:"x"}`, ""},
		{"bad run_at", "POST", "/v1/tasks", `{"title":"x","run_at":"tomorrow"}`, "run_at"},
		{"bad expires_at", "POST", "/v1/admin/keys", `{"principal_id":"x","scopes":["read"],"expires_at":"2020-13-45"}`, "expires_at"},

		{"title missing", "POST", "/v1/tasks", `{}`, "title"},
		{"title empty", "POST", "/v1/tasks", map[string]any{"title": ""}, "title"},
		{"title too long", "POST", "/v1/tasks", map[string]any{"title": strings.Repeat("t", 201)}, "title"},
		{"brief too long", "POST", "/v1/tasks", map[string]any{"title": "x", "brief": strings.Repeat("b", 64<<10+1)}, "brief"},
		{"payload too large", "POST", "/v1/tasks", map[string]any{"title": "x", "payload": strings.Repeat("p", 256<<10)}, "payload"},
		{"too many labels", "POST", "/v1/tasks", map[string]any{"title": "x", "labels": strings.Split("a b c d e f g h i j k l m n o p q", " ")}, "labels"},
		{"bad label", "POST", "/v1/tasks", map[string]any{"title": "x", "labels": []string{"has space"}}, "labels"},
		{"bad queue", "POST", "/v1/tasks", map[string]any{"title": "x", "queue": "no spaces"}, "queue"},
		{"queue too long", "POST", "/v1/tasks", map[string]any{"title": "x", "queue": strings.Repeat("q", 65)}, "queue"},
		{"priority too high", "POST", "/v1/tasks", map[string]any{"title": "x", "priority": 1_000_001}, "priority"},
		{"priority too low", "POST", "/v1/tasks", map[string]any{"title": "x", "priority": -1_000_001}, "priority"},
		{"max_attempts 0", "POST", "/v1/tasks", map[string]any{"title": "x", "max_attempts": 0}, "max_attempts"},
		{"max_attempts 101", "POST", "/v1/tasks", map[string]any{"title": "x", "max_attempts": 101}, "max_attempts"},
		{"run_at too far", "POST", "/v1/tasks", map[string]any{"title": "x", "run_at": "2999-01-01T00:00:00Z"}, "run_at"},

		{"claim bad queue", "POST", "/v1/claims", map[string]any{"queue": "a/b"}, "queue"},
		{"lease_seconds 5", "POST", "/v1/claims", map[string]any{"lease_seconds": 5}, "lease_seconds"},
		{"lease_seconds 4000", "POST", "/v1/claims", map[string]any{"lease_seconds": 4000}, "lease_seconds"},
		{"lease_seconds negative", "POST", "/v1/claims", map[string]any{"lease_seconds": -1}, "lease_seconds"},
		{"wait_seconds 21", "POST", "/v1/claims", map[string]any{"wait_seconds": 21}, "wait_seconds"},
		{"wait_seconds negative", "POST", "/v1/claims", map[string]any{"wait_seconds": -1}, "wait_seconds"},
		{"heartbeat lease_seconds 5", "POST", "/v1/claims/" + task.ID + "/heartbeat", map[string]any{"lease_token": tok, "lease_seconds": 5}, "lease_seconds"},
		{"heartbeat progress too large", "POST", "/v1/claims/" + task.ID + "/heartbeat", map[string]any{"lease_token": tok, "progress": strings.Repeat("p", 4<<10)}, "progress"},
		{"bad outcome", "POST", submitPath, map[string]any{"lease_token": tok, "outcome": "done"}, "outcome"},
		{"missing outcome", "POST", submitPath, map[string]any{"lease_token": tok}, "outcome"},
		{"result too large", "POST", submitPath, map[string]any{"lease_token": tok, "outcome": "succeeded", "result": strings.Repeat("r", 256<<10)}, "result"},
		{"error too long", "POST", submitPath, map[string]any{"lease_token": tok, "outcome": "failed", "error": strings.Repeat("e", 4<<10+1)}, "error"},
		{"note empty", "POST", "/v1/tasks/" + task.ID + "/notes", map[string]any{"body": ""}, "body"},
		{"note too long", "POST", "/v1/tasks/" + task.ID + "/notes", map[string]any{"body": strings.Repeat("n", 4<<10+1)}, "body"},

		{"limit 201", "GET", "/v1/tasks?limit=201", nil, "limit"},
		{"limit 0", "GET", "/v1/tasks?limit=0", nil, "limit"},
		{"limit abc", "GET", "/v1/tasks?limit=abc", nil, "limit"},
		{"bad cursor", "GET", "/v1/tasks?cursor=!!not-a-cursor!!", nil, "cursor"},
		{"bad state filter", "GET", "/v1/tasks?state=running", nil, "state"},
		{"bad queue filter", "GET", "/v1/tasks?queue=a%20b", nil, "queue"},
		{"bad label filter", "GET", "/v1/tasks?label=a%2Fb", nil, "label"},
		{"events since -1", "GET", "/v1/claims/" + task.ID + "/events?since=-1", nil, "since"},
		{"events wait 31", "GET", "/v1/claims/" + task.ID + "/events?wait=31", nil, "wait"},
		{"admin limit 201", "GET", "/v1/admin/keys?limit=201", nil, "limit"},
		{"admin bad cursor", "GET", "/v1/admin/principals?cursor=***", nil, "cursor"},
		{"principal bad kind", "POST", "/v1/admin/principals", map[string]any{"kind": "robot"}, "kind"},

		// Values any JSON reader reads alike (RFC 8259 §6, §8.2).
		{"lone high surrogate in a payload", "POST", "/v1/tasks", `{"title":"x","payload":{"a":"\ud800"}}`, "payload"},
		{"lone low surrogate in a payload key", "POST", "/v1/tasks", `{"title":"x","payload":{"\udc00":1}}`, "payload"},
		{"reversed pair in a payload", "POST", "/v1/tasks", `{"title":"x","payload":"\ude80\ud83d"}`, "payload"},
		{"number beyond a double in a payload", "POST", "/v1/tasks", `{"title":"x","payload":[1,1e400]}`, "payload"},
		{"negative number beyond a double", "POST", "/v1/tasks", `{"title":"x","payload":{"n":-2e308}}`, "payload"},
		{"lone surrogate in a title", "POST", "/v1/tasks", `{"title":"a\ud800b"}`, "title"},
		{"lone surrogate in a result", "POST", submitPath, `{"lease_token":"` + tok + `","outcome":"succeeded","result":"\udfff"}`, "result"},
		{"number beyond a double in a result", "POST", submitPath, `{"lease_token":"` + tok + `","outcome":"succeeded","result":1e999}`, "result"},
		{"lone surrogate in progress", "POST", "/v1/claims/" + task.ID + "/heartbeat", `{"lease_token":"` + tok + `","progress":{"s":"\ud800"}}`, "progress"},
		{"number beyond a double in progress", "POST", "/v1/claims/" + task.ID + "/heartbeat", `{"lease_token":"` + tok + `","progress":1E+309}`, "progress"},
		{"lone surrogate in a record value", "PUT", "/v1/records/b/k", `{"value":["\ud800"]}`, "value"},
		{"number beyond a double in a record value", "PUT", "/v1/records/b/k", `{"value":{"n":1e400}}`, "value"},
		{"run_at as a number", "POST", "/v1/tasks", `{"title":"x","run_at":12}`, "run_at"},
		{"expires_at as a number", "POST", "/v1/admin/keys", `{"principal_id":"x","scopes":["read"],"expires_at":1700000000}`, "expires_at"},
		{"control character in a title", "POST", "/v1/tasks", map[string]any{"title": "a\u0007b"}, "title"},
		{"escape sequence in a title", "POST", "/v1/tasks", map[string]any{"title": "\u001b[31mred"}, "title"},
		{"newline in a title", "POST", "/v1/tasks", map[string]any{"title": "two\nlines"}, "title"},
		{"C1 control in a display name", "POST", "/v1/admin/principals", map[string]any{"kind": "agent", "display_name": "a\u0085b"}, "display_name"},
		{"control character in an account", "POST", "/v1/admin/principals", map[string]any{"kind": "agent", "account": "a\u0000b"}, "account"},
		{"null for a string", "POST", "/v1/tasks", `{"title":null}`, "title"},
		{"null for a number", "POST", "/v1/tasks", `{"title":"x","priority":null}`, "priority"},
		{"allowance without fields", "PUT", "/v1/admin/storage/allowance", `{}`, "rows_read_per_day"},
		{"allowance without the read one", "PUT", "/v1/admin/storage/allowance", `{"rows_written_per_day":5}`, "rows_read_per_day"},
		{"allowance without the written one", "PUT", "/v1/admin/storage/allowance", `{"rows_read_per_day":5}`, "rows_written_per_day"},
		{"negative read allowance", "PUT", "/v1/admin/storage/allowance", `{"rows_written_per_day":0,"rows_read_per_day":-1}`, "rows_read_per_day"},
		{"negative written allowance", "PUT", "/v1/admin/storage/allowance", `{"rows_written_per_day":-1,"rows_read_per_day":0}`, "rows_written_per_day"},
		{"bucket without public", "PUT", "/v1/buckets/b", `{}`, "public"},
		{"submit without a lease token", "POST", submitPath, `{"outcome":"succeeded"}`, "lease_token"},
		{"record without a value", "PUT", "/v1/records/b/k", `{"if_version":0}`, "value"},
		{"key bad scope", "POST", "/v1/admin/keys", map[string]any{"principal_id": "x", "scopes": []string{"root"}}, "scopes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, s.do(tc.method, tc.path, adminKey, tc.body), 400, "invalid_request", tc.field)
		})
	}

	// Nothing above acted: one task, still leased, no record, no bucket,
	// the allowance as it was; and the bounds' edges are accepted.
	if ids := s.listIDs("main", adminKey, ""); len(ids) != 1 {
		t.Fatalf("refused requests created tasks: %v", ids)
	}
	wantError(t, s.do("GET", "/v1/records/b/k", adminKey, nil), 404, "not_found", "")
	if r := s.must(200, "GET", "/v1/buckets", adminKey, nil); !strings.Contains(string(r.Body), `"buckets":[]`) {
		t.Fatalf("refused requests created a bucket: %s", r.Body)
	}
	if r := s.must(200, "GET", "/v1/admin/storage", adminKey, nil); !strings.Contains(string(r.Body), `"allowance":{"rows_written_per_day":0,"rows_read_per_day":0}`) {
		t.Fatalf("refused requests changed the allowance: %s", r.Body)
	}
	if got := s.task("main", adminKey, task.ID); got.State != tessera.StateLeased || got.Attempts != 1 {
		t.Fatalf("refused requests changed the held task: %s", got.State)
	}
	s.must(201, "POST", "/v1/tasks", adminKey, nested(32))
	s.must(201, "POST", "/v1/tasks", adminKey, `{"title":"no labels","labels":null}`)
	// Surrogate pairs, large and tiny doubles, and control characters
	// inside a payload are fine; so are tabs and newlines in a brief.
	s.must(201, "POST", "/v1/tasks", adminKey, `{"title":"ok \ud83d\ude80","brief":"line\n\tline","payload":{"rocket":"\ud83d\ude80","big":1.7976931348623157e308,"tiny":1e-400,"ctl":"\u0007"}}`)
	s.must(201, "POST", "/v1/tasks", adminKey, map[string]any{
		"title": strings.Repeat("t", 200), "labels": strings.Split("a b c d e f g h i j k l m n o p", " "),
		"priority": 1_000_000, "max_attempts": 100, "queue": strings.Repeat("q", 64),
		"payload": strings.Repeat("p", 256<<10-2), "brief": strings.Repeat("b", 64<<10),
	})
	s.must(200, "GET", "/v1/tasks?limit=200", adminKey, nil)
	s.must(204, "POST", "/v1/claims", adminKey, map[string]any{"queue": "empty", "lease_seconds": 10, "wait_seconds": 0})
	s.must(204, "POST", "/v1/claims", adminKey, map[string]any{"queue": "empty", "lease_seconds": 3600})
}

func TestLimitsNotFound(t *testing.T) {
	s := newTestServer(t)
	missing := "01ARZ3NDEKTSV4RRFFQ69G5FAV"
	for _, rq := range []struct {
		method, path, key string
	}{
		{"GET", "/v1/nope", adminKey},
		{"GET", "/v1/nope", ""},
		{"POST", "/v1/tasks/" + missing + "/frobnicate", adminKey},
		{"GET", "/v2/tasks", adminKey},
		{"GET", "/ns/alpha/v1/nope", adminKey},
		{"GET", "/v1/tasks/" + missing, adminKey},
		{"GET", "/ns/alpha/v1/tasks/" + missing, adminKey},
		{"GET", "/v1/tasks/not-an-id!", adminKey},
		{"POST", "/v1/tasks/" + missing + "/cancel", adminKey},
		{"POST", "/v1/tasks/" + missing + "/pause", adminKey},
		{"POST", "/v1/tasks/" + missing + "/resume", adminKey},
		{"POST", "/v1/tasks/" + missing + "/retry", adminKey},
		{"POST", "/v1/tasks/" + missing + "/notes", adminKey},
		{"GET", "/v1/claims/" + missing + "/events", adminKey},
		{"DELETE", "/v1/admin/keys/nosuchkey", adminKey},
	} {
		var body any
		if strings.HasSuffix(rq.path, "/notes") {
			body = map[string]any{"body": "hello"}
		}
		r := s.do(rq.method, rq.path, rq.key, body)
		wantError(t, r, 404, "not_found", "")
	}
}

// A well-formed success is JSON with the spec's content type.
func TestResponsesAreJSON(t *testing.T) {
	s := newTestServer(t)
	r := s.must(201, "POST", "/v1/tasks", adminKey, map[string]any{"title": "x"})
	if ct := r.Header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Fatalf("Content-Type %q", ct)
	}
	if !bytes.HasPrefix(r.Body, []byte("{")) {
		t.Fatalf("body %s", r.Body)
	}
}
