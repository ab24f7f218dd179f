package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/mcp"
)

// FuzzDecodeBody holds the JSON-RPC request decoder to its contract: no
// input panics it; a body it takes apart is valid JSON, a batch of at most
// MaxBatch messages, and every message is either refused with a JSON-RPC
// error, a response, a notification or a request with a method, whose id
// is a string or an integer and whose params are an object.
func FuzzDecodeBody(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"whoami","arguments":{}}}`,
		`[{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":2,"result":{}}]`,
		`{"jsonrpc":"2.0","id":null,"method":"ping"}`, `{"jsonrpc":"2.0","id":1.5}`, `[]`, `[1,[2]]`, ``, `"x"`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","params":[]}`, "{\"id\":\"\xff\"}", `{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		msgs, batch, err := mcp.DecodeBody(body)
		if err != nil {
			if err.Code != mcp.CodeParseError && err.Code != mcp.CodeInvalidRequest || err.Message == "" || msgs != nil {
				t.Fatalf("DecodeBody(%q) failed with %+v and %d messages", body, err, len(msgs))
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("DecodeBody accepted invalid JSON %q", body)
		}
		if len(msgs) == 0 || len(msgs) > mcp.MaxBatch || (!batch && len(msgs) != 1) {
			t.Fatalf("DecodeBody(%q): %d messages, batch %v", body, len(msgs), batch)
		}
		for _, m := range msgs {
			switch {
			case m.Bad != nil:
				if m.Bad.Message == "" || m.Bad.Code > -32600 || m.Bad.Code < -32700 {
					t.Fatalf("DecodeBody(%q): bad message with %+v", body, m.Bad)
				}
			case m.Response:
				if m.ID == nil || m.Method != "" {
					t.Fatalf("DecodeBody(%q): response %+v", body, m)
				}
			default:
				if m.Method == "" || (m.Params != nil && m.Params[0] != '{') {
					t.Fatalf("DecodeBody(%q): request %+v", body, m)
				}
			}
			if m.ID != nil {
				var id any
				if json.Unmarshal(m.ID, &id) != nil {
					t.Fatalf("DecodeBody(%q): id %s", body, m.ID)
				}
				switch id.(type) {
				case string, float64:
				default:
					t.Fatalf("DecodeBody(%q): id %s is neither a string nor an integer", body, m.ID)
				}
			}
		}
	})
}

// FuzzTaskMethods sends the tasks extension's requests, whatever their
// params and routing headers, to a real server with a key: no input
// panics it or draws a 500, and every answer is a JSON-RPC response or,
// for a subscription that follows nothing, a stream that acknowledges and
// ends.
func FuzzTaskMethods(f *testing.F) {
	s := start(f)
	key := s.newKey("namespace:main", "enqueue", "read")
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
	for _, seed := range []struct{ method, name, params string }{
		{"tasks/get", "main:01JF0000000000000000000000", `{"taskId":"main:01JF0000000000000000000000",` + meta + `}`},
		{"tasks/cancel", "x", `{"taskId":"x",` + meta + `}`},
		{"tasks/update", "main:", `{"taskId":"main:","inputResponses":{"k":{"action":"accept"}},` + meta + `}`},
		{"tasks/get", "", `{"taskId":7,` + meta + `}`},
		{"subscriptions/listen", "", `{"notifications":{"taskIds":["main:nope","a:b:c"]},` + meta + `}`},
		{"subscriptions/listen", "", `{"notifications":{"taskIds":"no"},` + meta + `}`},
		{"tools/call", "run_task", `{"name":"run_task","arguments":{"title":""},` + meta + `}`},
	} {
		f.Add(seed.method, seed.name, []byte(seed.params))
	}
	f.Fuzz(func(t *testing.T, method, name string, params []byte) {
		if !headerValue(method) || !headerValue(name) {
			return // no client sends it
		}
		body := []byte(`{"jsonrpc":"2.0","id":1,"method":` + strconv.Quote(method) + `,"params":` + string(params) + `}`)
		req, _ := http.NewRequest("POST", s.URL+"/mcp", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header["Mcp-Method"] = []string{method}
		req.Header["Mcp-Name"] = []string{name}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err := http.DefaultClient.Do(req.WithContext(ctx))
		if err != nil {
			t.Fatalf("%s %s: %v", method, params, err)
		}
		defer res.Body.Close()
		out, err := io.ReadAll(res.Body)
		if err != nil || res.StatusCode >= 500 {
			t.Fatalf("%s %s: %d %s %v", method, params, res.StatusCode, out, err)
		}
		if res.Header.Get("Content-Type") == "text/event-stream" {
			if !bytes.Contains(out, []byte("notifications/subscriptions/acknowledged")) {
				t.Fatalf("%s %s: a stream without its acknowledgement: %s", method, params, out)
			}
			return
		}
		if res.StatusCode != http.StatusAccepted && !json.Valid(out) {
			t.Fatalf("%s %s: %d %q is not JSON", method, params, res.StatusCode, out)
		}
	})
}

// headerValue reports whether v can be an HTTP header's value as Go's
// client sends it: visible ASCII and spaces.
func headerValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if v[i] < ' ' || v[i] > '~' {
			return false
		}
	}
	return true
}
