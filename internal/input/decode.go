package input

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tessera-dev/tessera/internal/tessera"
)

// MaxDepth bounds nesting in any request body (SPEC §5).
const MaxDepth = 32

// Options say what a decoded object may hold besides its body fields.
type Options struct {
	// All reads every field from the object, wherever HTTP finds it: MCP
	// tool arguments carry path, query and header fields too.
	All bool
	// Extra is offered each top-level member that is no field; it reports
	// whether it took it (MCP's namespace argument). Others are unknown.
	Extra func(name string, raw json.RawMessage) bool
}

// Decode reads body into dst, a pointer to an input struct, under the rules
// of SPEC §5: valid UTF-8, nesting at most MaxDepth, one JSON object (an
// empty body or null reads as {}), no unknown or repeated member at any
// depth of the input type, null only where the field takes it, every
// required field present, and only values that every JSON reader reads
// alike. A field at fault is named as the client wrote it
// (tasks[3].title); malformed JSON is located by its byte offset.
func Decode(body []byte, dst any, o Options) error {
	if !utf8.Valid(body) {
		return tessera.Errorf(tessera.CodeInvalidRequest, "the request body is not valid UTF-8")
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		trimmed = []byte("{}")
	}
	if depth(trimmed) > MaxDepth {
		return tessera.Errorf(tessera.CodeInvalidRequest, "the request body nests deeper than %d", MaxDepth)
	}
	rv := reflect.ValueOf(dst)
	t := TypeOf(rv.Type())
	if t == nil {
		// A body that is not an input struct: syntax alone.
		return syntax(trimmed, json.Unmarshal(trimmed, dst))
	}
	d := decoder{o: o}
	return d.object(trimmed, t, rv.Elem(), true)
}

type decoder struct{ o Options }

// object decodes one JSON object into struct value v of type t. Fields
// are named relative to it; a nested object's caller puts them in place
// (within).
func (d *decoder) object(raw []byte, t *Type, v reflect.Value, top bool) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return syntax(raw, err)
	}
	if tok != json.Delim('{') {
		if top {
			return tessera.Errorf(tessera.CodeInvalidRequest, "the request body must be a JSON object")
		}
		return tessera.Errorf(tessera.CodeInvalidRequest, "it must be an object")
	}
	seen := make([]bool, len(t.Fields))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return syntax(raw, err)
		}
		key, _ := tok.(string)
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return syntax(raw, err)
		}
		i := slices.IndexFunc(t.Fields, func(f *Field) bool { return f.Name == key })
		if i < 0 || !d.o.All && t.Fields[i].In != InBody {
			if top && d.o.Extra != nil && d.o.Extra(key, val) {
				continue
			}
			return tessera.Invalid(Clip(key), "unknown field %q", Clip(key))
		}
		f := t.Fields[i]
		name := key
		if seen[i] {
			return tessera.Invalid(name, "field %q is given twice", name)
		}
		seen[i] = true
		if err := d.field(f, val, f.value(v), name); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil {
		return syntax(raw, err)
	}
	if top {
		if _, err := dec.Token(); err != io.EOF {
			return tessera.Errorf(tessera.CodeInvalidRequest, "the request body holds more than one JSON value")
		}
	}
	var missing []string
	for i, f := range t.Fields {
		if f.Required && !seen[i] && (d.o.All || f.In == InBody) {
			missing = append(missing, f.Name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing) // the first by name, whatever the declaration order
		return tessera.Invalid(missing[0], "%s is required", missing[0])
	}
	return nil
}

// field decodes one member's value into field value v.
func (d *decoder) field(f *Field, raw json.RawMessage, v reflect.Value, name string) error {
	if string(raw) == "null" {
		switch {
		case !f.Nullable:
			return tessera.Invalid(name, "%s must not be null", name)
		case f.Type == rawJSON:
			v.SetBytes(raw) // null is a JSON value like any other
		default:
			v.SetZero()
		}
		return nil
	}
	if f.Elem != nil {
		return d.nested(f, raw, v, name)
	}
	if err := checkValue(raw); err != nil {
		return tessera.Invalid(name, "%s %s", name, err)
	}
	if err := json.Unmarshal(raw, v.Addr().Interface()); err != nil {
		return typeError(f.Type, name, err)
	}
	return nil
}

// nested decodes a struct, a pointer to one, or a list of them, as
// strictly as the top level.
func (d *decoder) nested(f *Field, raw json.RawMessage, v reflect.Value, name string) error {
	inner := decoder{o: Options{All: d.o.All}}
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		return within(name, inner.object(raw, f.Elem, v.Elem(), false))
	case reflect.Struct:
		return within(name, inner.object(raw, f.Elem, v, false))
	}
	if raw[0] != '[' {
		return tessera.Invalid(name, "%s must be an array", name)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return tessera.Invalid(name, "%s must be an array", name)
	}
	// The count first: an oversized list is refused before any of it is
	// decoded.
	if err := f.Bound.checkLen(name, len(items), "items"); err != nil {
		return err
	}
	list := reflect.MakeSlice(v.Type(), len(items), len(items))
	for i, item := range items {
		at := fmt.Sprintf("%s[%d]", name, i)
		if string(item) == "null" {
			return within(at, tessera.Errorf(tessera.CodeInvalidRequest, "it must be an object"))
		}
		if err := inner.object(item, f.Elem, list.Index(i), false); err != nil {
			return within(at, err)
		}
	}
	v.Set(list)
	return nil
}

// within puts a nested object's error in place: its field under at
// (tasks[3].title), its message after it ("tasks[3]: title is required").
func within(at string, err error) error {
	var e *tessera.Error
	if !errors.As(err, &e) {
		return err
	}
	named := *e
	named.Field, named.Message = at, at+": "+e.Message
	if e.Field != "" {
		named.Field = at + "." + e.Field
	}
	return &named
}

// syntax turns the JSON reader's complaint into invalid_request, saying
// where the body stops being JSON.
func syntax(raw []byte, err error) error {
	if err == nil {
		return nil
	}
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return tessera.Errorf(tessera.CodeInvalidRequest, "the request body is not valid JSON: %s at byte %d", se.Error(), se.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return tessera.Errorf(tessera.CodeInvalidRequest, "the request body is not valid JSON: it ends early, at byte %d", len(raw))
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return tessera.Errorf(tessera.CodeInvalidRequest, "the request body must be a JSON object")
	}
	return tessera.Errorf(tessera.CodeInvalidRequest, "the request body does not fit this route")
}

func typeError(t reflect.Type, name string, err error) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == timeType {
		return tessera.Invalid(name, "%s must be an RFC 3339 timestamp string", name)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return tessera.Invalid(name, "%s must be %s", name, Kind(t))
	}
	return tessera.Invalid(name, "%s does not fit this route", name)
}

// Kind says what JSON a Go type takes, for error messages.
func Kind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == timeType:
		return "an RFC 3339 timestamp string"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		return "an integer"
	case t.Kind() == reflect.Float64 || t.Kind() == reflect.Float32:
		return "a number"
	case t.Kind() == reflect.String:
		return "a string"
	case t.Kind() == reflect.Bool:
		return "true or false"
	case t.Kind() == reflect.Slice:
		return "an array"
	}
	return "an object"
}

// checkValue refuses what valid JSON may hold but readers disagree on
// (RFC 8259 §8.2, §6; RFC 7493): a string escape of half a surrogate pair,
// which encoding/json turns into U+FFFD and other readers reject or keep,
// and a number beyond the range of an IEEE-754 double, which most readers
// cannot hold. raw is valid JSON.
func checkValue(raw []byte) error {
	for i := 0; i < len(raw); i++ {
		switch ch := raw[i]; {
		case ch == '"':
			end, err := checkString(raw, i+1)
			if err != nil {
				return err
			}
			i = end
		case ch == '-' || ch >= '0' && ch <= '9':
			j := i
			for j < len(raw) && strings.IndexByte("+-.0123456789eE", raw[j]) >= 0 {
				j++
			}
			if _, err := strconv.ParseFloat(string(raw[i:j]), 64); err != nil {
				return fmt.Errorf("holds the number %.40s, beyond the range of a double", raw[i:j])
			}
			i = j - 1
		}
	}
	return nil
}

// checkString scans the string whose contents start at raw[i] and returns
// the index of its closing quote.
func checkString(raw []byte, i int) (int, error) {
	for ; i < len(raw); i++ {
		switch raw[i] {
		case '"':
			return i, nil
		case '\\':
			if raw[i+1] != 'u' {
				i++
				continue
			}
			r := hex4(raw[i+2 : i+6])
			i += 5
			switch {
			case r >= 0xDC00 && r <= 0xDFFF:
				return 0, errors.New("holds a lone low surrogate escape")
			case r >= 0xD800 && r <= 0xDBFF:
				if i+6 >= len(raw) || raw[i+1] != '\\' || raw[i+2] != 'u' {
					return 0, errors.New("holds a lone high surrogate escape")
				}
				if low := hex4(raw[i+3 : i+7]); low < 0xDC00 || low > 0xDFFF {
					return 0, errors.New("holds a lone high surrogate escape")
				}
				i += 6
			}
		}
	}
	return i, nil
}

func hex4(b []byte) rune {
	n, _ := strconv.ParseUint(string(b), 16, 32)
	return rune(n)
}

// depth returns the deepest nesting of arrays and objects in b, looking
// past strings. It does not validate; the decoder does that afterwards.
func depth(b []byte) int {
	d, deepest := 0, 0
	inString, escaped := false, false
	for _, ch := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case ch == '\\':
				escaped = true
			case ch == '"':
				inString = false
			}
		case ch == '"':
			inString = true
		case ch == '{' || ch == '[':
			d++
			deepest = max(deepest, d)
		case ch == '}' || ch == ']':
			d--
		}
	}
	return deepest
}

// Members walks the members of a JSON object whose syntax is known to be
// valid, refusing a member given twice: the envelopes (MCP messages, tool
// call params) hold to the body rules too.
func Members(raw []byte, each func(name string, value json.RawMessage) error) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return errors.New("not an object")
	}
	var seen []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		name, _ := tok.(string)
		if slices.Contains(seen, name) {
			return fmt.Errorf("member %q is given twice", Clip(name))
		}
		seen = append(seen, name)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return err
		}
		if err := each(name, v); err != nil {
			return err
		}
	}
	return nil
}
