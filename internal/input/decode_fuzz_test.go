package input_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/input"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// decodeSeeds are bodies worth starting from: valid bodies of the three
// busiest routes, and the shapes §5 says must be refused cleanly.
var decodeSeeds = []string{
	// valid
	``,
	`   `,
	`{}`,
	`{"title":"summarize the report","payload":{"doc":"r-17"}}`,
	`{"queue":"gpu.large:v2","title":"t","brief":"b","payload":[1,"two",{"3":null}],"labels":["a","b"],"priority":-5,"public":true,"max_attempts":3,"run_at":"2030-01-01T00:00:00.123Z"}`,
	`{"queue":"default","lease_seconds":60,"wait_seconds":20}`,
	`{"lease_token":"tok","outcome":"succeeded","result":{"summary":"…"}}`,
	`{"lease_token":"tok","outcome":"failed","error":"it broke"}`,
	"\n{\"title\" : \"spaced\"}\n",
	// unicode
	`{"title":"Tïtle ✓ 日本語 🚀"}`,
	`{"title":"\u00e9\u0000\ud83d\ude80"}`,
	`{"title":"\ud800 lone surrogate"}`,
	`{"tïtle":"unknown field with unicode"}`,
	"{\"title\":\"\xff\xfe not UTF-8\"}",
	"\xef\xbb\xbf{}",
	// numbers
	`{"priority":1e400}`,
	`{"priority":99999999999999999999999999999}`,
	`{"priority":-9223372036854775809}`,
	`{"priority":1.5}`,
	`{"lease_seconds":-1e308,"wait_seconds":1e-400}`,
	`{"max_attempts":null}`,
	`{"payload":123456789012345678901234567890e99999}`,
	// nesting
	`{"payload":` + strings.Repeat(`[`, 31) + strings.Repeat(`]`, 31) + `}`,
	`{"payload":` + strings.Repeat(`[`, 32) + strings.Repeat(`]`, 32) + `}`,
	`{"payload":` + strings.Repeat(`{"a":`, 40) + `1` + strings.Repeat(`}`, 40) + `}`,
	strings.Repeat(`[`, 10000),
	strings.Repeat(`]`, 100) + `{}`,
	`{"payload":"` + strings.Repeat(`[`, 100) + `"}`,
	`{"payload":"\"[[[[[\\"}`,
	// wrong shapes
	`null`,
	`[]`,
	`"a string"`,
	`42`,
	`{"title":1}`,
	`{"labels":"a"}`,
	`{"labels":[1,2]}`,
	`{"public":"yes"}`,
	`{"run_at":"tomorrow"}`,
	`{"run_at":12}`,
	`{"result":}`,
	`{"title":"a"} {"title":"b"}`,
	`{"title":"a"}x`,
	`{"title":"a",}`,
	`{"title":"a"`,
	`{"title":"a","title":"b"}`,
	`{"TITLE":"case"}`,
	`{"nope":1}`,
}

// FuzzDecodeJSON checks the request decoder of §5: no input panics it, every
// refusal is invalid_request, and what it accepts is one valid JSON value
// nested at most MaxJSONDepth deep.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		targets := []struct {
			name string
			dst  func() any
		}{
			{"EnqueueParams", func() any { return &core.EnqueueParams{} }},
			{"ClaimParams", func() any { return &core.ClaimParams{} }},
			{"SubmitParams", func() any { return &core.SubmitParams{} }},
		}
		for _, tg := range targets {
			err := input.Decode(body, tg.dst(), input.Options{})
			if err != nil {
				var e *tessera.Error
				if !errors.As(err, &e) || e.Code != tessera.CodeInvalidRequest {
					t.Fatalf("%s: DecodeJSON(%q) = %#v, want a *tessera.Error with code invalid_request", tg.name, body, err)
				}
				continue
			}
			if len(bytes.TrimSpace(body)) == 0 {
				continue // an empty body is {}
			}
			if !json.Valid(body) {
				t.Fatalf("%s: DecodeJSON accepted invalid JSON %q", tg.name, body)
			}
			if d := jsonNesting(t, body); d > input.MaxDepth {
				t.Fatalf("%s: DecodeJSON accepted %q nested %d deep", tg.name, body, d)
			}
			wantInterop(t, body)
		}
	})
}

// recordSeeds are record bodies around the value rules: surrogates,
// numbers at and past the range of a double, escapes, nesting, null.
var recordSeeds = []string{
	`{"value":1}`,
	`{"value":null}`,
	`{"value":"\ud83d\ude80"}`,
	`{"value":"\ud800"}`,
	`{"value":"\udc00\ud800"}`,
	`{"value":"\ud800\u0041"}`,
	`{"value":{"\ud800":1}}`,
	`{"value":"\\ud800"}`,
	`{"value":"\ufffd"}`,
	`{"value":"\uFFFD\ud83d"}`,
	"{\"value\":\"\xef\xbf\xbd\"}",
	`{"value":1e308}`,
	`{"value":1.7976931348623157e308}`,
	`{"value":1.7976931348623159e308}`,
	`{"value":1e309}`,
	`{"value":-1e400}`,
	`{"value":1e-400}`,
	`{"value":123456789012345678901234567890}`,
	`{"value":[0,-0,0.5e-3,1E+2,-12.5e10]}`,
	`{"value":` + strings.Repeat(`[`, 31) + strings.Repeat(`]`, 31) + `}`,
	`{"value":{"a":[{"b":"c"}]},"if_version":0,"lease_token":"t"}`,
	`{"value":1,"if_version":1e400}`,
	`{"if_version":1}`,
	`{"value":1,"value":2}`,
}

// FuzzRecordValue checks the decoding of a record write, whose value is
// any JSON: no input panics it, every refusal is invalid_request, and a
// value it accepts is one every JSON reader reads alike — numbers within
// a double, no lone surrogate (which encoding/json would quietly turn
// into U+FFFD).
func FuzzRecordValue(f *testing.F) {
	for _, s := range recordSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var p core.PutRecordParams
		err := input.Decode(body, &p, input.Options{})
		if err != nil {
			var e *tessera.Error
			if !errors.As(err, &e) || e.Code != tessera.CodeInvalidRequest {
				t.Fatalf("DecodeJSON(%q) = %#v, want a *tessera.Error with code invalid_request", body, err)
			}
			return
		}
		if p.Value == nil || !json.Valid(p.Value) {
			t.Fatalf("DecodeJSON(%q) accepted the value %q", body, p.Value)
		}
		if d := jsonNesting(t, p.Value); d >= input.MaxDepth {
			t.Fatalf("DecodeJSON(%q) accepted a value nested %d deep", body, d)
		}
		wantInterop(t, body)
	})
}

// wantInterop fails unless body, which the decoder accepted, reads into
// Go values without loss: every number fits a double, and decoding its
// strings makes no U+FFFD that the body did not spell.
func wantInterop(t *testing.T, body []byte) {
	t.Helper()
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("accepted %q, which encoding/json cannot read: %v", body, err)
	}
	// Every string token, keys included (and repeated keys, which a map
	// would fold), as the standard tokenizer decodes it.
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	decoded := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("tokenize %q: %v", body, err)
		}
		if s, ok := tok.(string); ok {
			decoded += strings.Count(s, "\ufffd")
		}
	}
	if spelled := spelledReplacements(body); decoded != spelled {
		t.Fatalf("accepted %q: decoding makes %d U+FFFD where the body spells %d (a lone surrogate got through)", body, decoded, spelled)
	}
}

// spelledReplacements counts the U+FFFD a JSON text spells: as UTF-8 or
// as a \ufffd escape.
func spelledReplacements(b []byte) int {
	n := strings.Count(string(b), "\ufffd")
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		if i+5 < len(b) && b[i+1] == 'u' && strings.EqualFold(string(b[i+2:i+6]), "fffd") {
			n++
		}
		i++ // the escaped character is not an escape itself
	}
	return n
}

// jsonNesting is the nesting depth of a valid JSON value, by the standard
// tokenizer rather than the byte scan the server uses.
func jsonNesting(t *testing.T, body []byte) int {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // numbers beyond float64 are valid JSON
	d, deepest := 0, 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return deepest
		}
		if err != nil {
			t.Fatalf("tokenize %q: %v", body, err)
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			d++
			deepest = max(deepest, d)
		case json.Delim('}'), json.Delim(']'):
			d--
		}
	}
}

// TestDecodeJSON is the table version of the fuzz target's rules: what the
// three busiest routes accept, and that every refusal is invalid_request,
// naming the field when one is at fault.
func TestDecodeJSON(t *testing.T) {
	enqueue := func() any { return &core.EnqueueParams{} }
	claim := func() any { return &core.ClaimParams{} }
	submit := func() any { return &core.SubmitParams{} }
	cases := []struct {
		name  string
		dst   func() any
		body  string
		ok    bool
		field string // for a refusal, the field it names ("" = none)
	}{
		{"empty body is {}", claim, ``, true, ""},
		{"blank body is {}", claim, " \n\t", true, ""},
		{"enqueue", enqueue, decodeSeeds[4], true, ""},
		{"claim", claim, `{"queue":"default","lease_seconds":60,"wait_seconds":20}`, true, ""},
		{"submit", submit, `{"lease_token":"tok","outcome":"succeeded","result":{"summary":"…"}}`, true, ""},
		{"unicode and escapes", enqueue, `{"title":"Tïtle ✓ 🚀 \u00e9\u0000\ud83d\ude80"}`, true, ""},
		{"depth 32 in a payload", enqueue, `{"title":"t","payload":` + strings.Repeat(`[`, 31) + strings.Repeat(`]`, 31) + `}`, true, ""},
		{"brackets inside a string", enqueue, `{"title":"t","payload":"` + strings.Repeat(`[`, 100) + `\"["}`, true, ""},

		{"depth 33", enqueue, `{"payload":` + strings.Repeat(`[`, 32) + strings.Repeat(`]`, 32) + `}`, false, ""},
		{"unclosed depth", claim, strings.Repeat(`[`, 10000), false, ""},
		{"invalid UTF-8", enqueue, "{\"title\":\"\xff\"}", false, ""},
		{"byte order mark", claim, "\xef\xbb\xbf{}", false, ""},
		{"unknown field", claim, `{"queue":"q","nope":1}`, false, "nope"},
		{"field of another route", claim, `{"title":"t"}`, false, "title"},
		{"string for a number", claim, `{"lease_seconds":"60"}`, false, "lease_seconds"},
		{"number too big for int", enqueue, `{"title":"t","priority":1e400}`, false, "priority"},
		{"integer overflow", enqueue, `{"title":"t","priority":99999999999999999999999}`, false, "priority"},
		{"fraction for an int", claim, `{"wait_seconds":1.5}`, false, "wait_seconds"},
		{"number for a list", enqueue, `{"labels":"a"}`, false, "labels"},
		{"bad timestamp", enqueue, `{"run_at":"tomorrow"}`, false, ""},
		{"number for a timestamp", enqueue, `{"run_at":12}`, false, ""},
		{"null body reads as {}", claim, `null`, true, ""},
		{"null body misses a required field", submit, `null`, false, "lease_token"},
		{"array body", submit, `[]`, false, ""},
		{"string body", submit, `"x"`, false, ""},
		{"two values", submit, `{} {}`, false, ""},
		{"trailing garbage", submit, `{}x`, false, ""},
		{"trailing comma", submit, `{"outcome":"failed",}`, false, ""},
		{"truncated", submit, `{"outcome":"fai`, false, ""},
		{"missing value", submit, `{"result":}`, false, ""},
	}
	for _, tc := range cases {
		err := input.Decode([]byte(tc.body), tc.dst(), input.Options{})
		if tc.ok {
			if err != nil {
				t.Errorf("%s: DecodeJSON(%.60q) = %v, want success", tc.name, tc.body, err)
			}
			continue
		}
		var e *tessera.Error
		if !errors.As(err, &e) || e.Code != tessera.CodeInvalidRequest {
			t.Errorf("%s: DecodeJSON(%.60q) = %v, want invalid_request", tc.name, tc.body, err)
			continue
		}
		if tc.field != "" && e.Field != tc.field {
			t.Errorf("%s: refusal names field %q, want %q (%v)", tc.name, e.Field, tc.field, e)
		}
	}
}

// Keys match field names exactly and once: encoding/json alone would take
// "TITLE" for title and keep the last of two "title"s.
func TestDecodeJSONExactKeys(t *testing.T) {
	for _, body := range []string{`{"TITLE":"x"}`, `{"title":"a","title":"b"}`, `{"Queue":"q","title":"x"}`} {
		var p core.EnqueueParams
		err := input.Decode([]byte(body), &p, input.Options{})
		var e *tessera.Error
		if !errors.As(err, &e) || e.Code != tessera.CodeInvalidRequest || e.Field == "" {
			t.Errorf("%s: %v, want invalid_request naming the field", body, err)
		}
	}
	var p core.EnqueueParams
	if err := input.Decode([]byte(`{"title":"x","queue":"q"}`), &p, input.Options{}); err != nil || p.Title != "x" {
		t.Errorf("exact keys refused: %v", err)
	}
}

// FuzzDecodeBatch checks a batch's decoding, whose tasks are decoded as
// strictly as a single enqueue's body: no input panics it, every refusal
// is invalid_request naming tasks, a task (tasks[i]…) or a field of the
// envelope, and an accepted batch holds 1–500 tasks, each exactly what the
// body of a single enqueue would decode to.
func FuzzDecodeBatch(f *testing.F) {
	for _, s := range []string{
		`{"tasks":[{"title":"a"},{"title":"b","queue":"q","payload":{"n":1}}]}`,
		`{"tasks":[]}`, `{}`, `{"tasks":null}`, `{"tasks":[null]}`, `{"tasks":["x"]}`, `{"tasks":{}}`,
		`{"tasks":[{"TITLE":"a"}]}`, `{"tasks":[{"title":"a","title":"b"}]}`, `{"tasks":[{"title":"a","nope":1}]}`,
		`{"tasks":[{"title":"a","run_at":"soon"}]}`, `{"tasks":[{"title":1}]}`, `{"tasks":[{"title":"a"}],"x":1}`,
		`{"tasks":[` + strings.Repeat(`{},`, 600) + `{}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var batch core.EnqueueBatchParams
		err := input.Decode(body, &batch, input.Options{})
		if err == nil {
			err = input.Check(&batch)
		}
		if err != nil {
			var e *tessera.Error
			if !errors.As(err, &e) || e.Code != tessera.CodeInvalidRequest {
				t.Fatalf("batch %q refused with %#v, want invalid_request", body, err)
			}
			var members map[string]json.RawMessage
			_ = json.Unmarshal(body, &members)
			if _, envelope := members[e.Field]; !envelope && e.Field != "" && e.Field != "tasks" && !strings.HasPrefix(e.Field, "tasks[") {
				t.Fatalf("batch %q refused naming %q, neither the tasks, one of them, nor a member of the envelope", body, e.Field)
			}
			return
		}
		var env struct {
			Tasks []json.RawMessage `json:"tasks"`
		}
		if err := json.Unmarshal(body, &env); err != nil {
			t.Fatalf("batch %q accepted, but it is no object of tasks: %v", body, err)
		}
		if len(batch.Tasks) < 1 || len(batch.Tasks) > core.MaxBatchTasks || len(batch.Tasks) != len(env.Tasks) {
			t.Fatalf("batch %q accepted with %d tasks", body, len(batch.Tasks))
		}
		for i, raw := range env.Tasks {
			var one core.EnqueueParams
			if err := input.Decode(raw, &one, input.Options{}); err != nil {
				t.Fatalf("task %d %q accepted in a batch, refused alone: %v", i, raw, err)
			}
			if err := input.Check(&one); err != nil {
				t.Fatalf("task %d %q accepted in a batch, refused alone: %v", i, raw, err)
			}
			a, _ := json.Marshal(batch.Tasks[i])
			b, _ := json.Marshal(one)
			if !bytes.Equal(a, b) {
				t.Fatalf("task %d decoded as %s in a batch, %s alone", i, a, b)
			}
		}
	})
}
