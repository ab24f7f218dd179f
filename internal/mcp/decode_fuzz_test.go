package mcp_test

import (
	"encoding/json"
	"testing"

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
