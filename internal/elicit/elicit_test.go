package elicit

import (
	"encoding/json"
	"strings"
	"testing"
)

const form = `{"type":"object","required":["name","size"],"properties":{
 "name":{"type":"string","title":"Name","minLength":2,"maxLength":5},
 "mail":{"type":"string","format":"email"},
 "site":{"type":"string","format":"uri"},
 "day":{"type":"string","format":"date"},
 "when":{"type":"string","format":"date-time"},
 "size":{"type":"string","enum":["s","m"],"enumNames":["Small","Medium"]},
 "tier":{"type":"string","oneOf":[{"const":"gold","title":"Gold"}]},
 "n":{"type":"integer","minimum":1,"maximum":3},
 "x":{"type":"number","maximum":1.5},
 "ok":{"type":"boolean","default":true},
 "tags":{"type":"array","items":{"anyOf":[{"const":"a"},{"const":"b"}]},"minItems":1,"maxItems":2}}}`

func TestValidateNamesTheField(t *testing.T) {
	s, err := Parse(json.RawMessage(form))
	if err != nil {
		t.Fatal(err)
	}
	valid := `{"name":"ann","size":"m","mail":"a@b.c","site":"https://x.y/z","day":"2026-12-05","when":"2026-12-05T10:00:00Z",` +
		`"tier":"gold","n":2,"x":1.5,"ok":false,"tags":["a","b"]}`
	if err := s.Validate(json.RawMessage(valid)); err != nil {
		t.Fatalf("valid content: %v", err)
	}
	for content, want := range map[string]string{
		`{"size":"s"}`:                           `field "name" is required`,
		`{"name":"a","size":"s"}`:                `field "name": must be at least 2 characters`,
		`{"name":"ännnnn","size":"s"}`:           `field "name": must be at most 5 characters`,
		`{"name":"ann","size":"l"}`:              `field "size": "l" is not one of the choices`,
		`{"name":"ann","size":"s","tier":"x"}`:   `field "tier": "x" is not one of the choices`,
		`{"name":"ann","size":"s","mail":"no"}`:  `field "mail": must have format email`,
		`{"name":"ann","size":"s","site":"x"}`:   `field "site": must have format uri`,
		`{"name":"ann","size":"s","day":"5/12"}`: `field "day": must have format date`,
		`{"name":"ann","size":"s","when":"now"}`: `field "when": must have format date-time`,
		`{"name":"ann","size":"s","n":0}`:        `field "n": must be at least 1`,
		`{"name":"ann","size":"s","n":2.5}`:      `field "n": must be an integer`,
		`{"name":"ann","size":"s","x":"1"}`:      `field "x": must be a number`,
		`{"name":"ann","size":"s","ok":"yes"}`:   `field "ok": must be true or false`,
		`{"name":"ann","size":"s","tags":[]}`:    `field "tags": must have at least 1 items`,
		`{"name":"ann","size":"s","tags":["c"]}`: `field "tags": "c" is not one of the choices`,
		`{"name":"ann","size":"s","tags":"a"}`:   `field "tags": must be an array of strings`,
		`{"name":"ann","size":"s","other":1}`:    `field "other" is not in the schema`,
		`[]`:                                     `content must be a JSON object`,
		`null`:                                   `content must be a JSON object`,
	} {
		err := s.Validate(json.RawMessage(content))
		if err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %q", content, err, want)
		}
	}
}

func TestParseRefusesWhatIsNotAFlatForm(t *testing.T) {
	for schema, want := range map[string]string{
		`{"type":"array"}`: `type must be "object"`,
		`{"type":"object","properties":{"a":{"type":"object"}}}`:                  `property "a": type "object" is not`,
		`{"type":"object","properties":{"a":{"type":"string","format":"ipv4"}}}`:  `format "ipv4"`,
		`{"type":"object","properties":{"a":{"type":"array","items":{}}}}`:        `needs enum or anyOf`,
		`{"type":"object","properties":{"a":null}}`:                               `property "a" is null`,
		`{"type":"object","properties":{"a":{"type":"string"}},"required":["b"]}`: `required "b" is not a property`,
		`{"type":"object","properties":{"a":{"type":"string","minLength":"1"}}}`:  `schema:`,
		`not json`: `schema:`,
	} {
		_, err := Parse(json.RawMessage(schema))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want it to say %q", schema, err, want)
		}
	}
	var many strings.Builder
	many.WriteString(`{"type":"object","properties":{`)
	for i := range MaxFields + 1 {
		if i > 0 {
			many.WriteString(",")
		}
		many.WriteString(`"f` + strings.Repeat("x", i) + `":{"type":"boolean"}`)
	}
	many.WriteString("}}")
	if _, err := Parse(json.RawMessage(many.String())); err == nil || !strings.Contains(err.Error(), "at most 32 properties") {
		t.Errorf("33 fields: %v", err)
	}
	if _, err := Parse(Empty); err != nil {
		t.Errorf("the approval's empty form: %v", err)
	}
}

// FuzzValidate holds any schema and content to an answer, never a panic:
// what Parse accepts, Validate judges.
func FuzzValidate(f *testing.F) {
	f.Add(form, `{"name":"ann","size":"m"}`)
	f.Add(string(Empty), `{}`)
	f.Add(`{"type":"object","properties":{"t":{"type":"array","items":{"enum":["a"]},"maxItems":0}}}`, `{"t":["a"]}`)
	f.Fuzz(func(t *testing.T, schema, content string) {
		s, err := Parse(json.RawMessage(schema))
		if err != nil {
			return
		}
		_ = s.Validate(json.RawMessage(content))
	})
}
