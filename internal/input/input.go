// Package input owns how a request's input becomes an operation's typed
// arguments, the same way over every transport: the JSON rules of SPEC §5
// (Decode), the bounds each input type declares of its fields (Bounds,
// Check), and those bounds as JSON Schema keywords (Keywords). The HTTP
// route table, the MCP tool schemas, the OpenAPI document and the checks
// all read the one declaration, so they cannot disagree.
//
// An input type is a struct whose fields carry their JSON name in the json
// tag, where HTTP finds them in the in tag (path, query or header=Name;
// none: the body), an optional doc tag, and whose bounds come from a
// Bounds method (of the struct or of a struct it embeds).
package input

import (
	"cmp"
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"time"
)

// Where a field comes from over HTTP. Over MCP every field is an argument.
const (
	InBody   = ""
	InPath   = "path"
	InQuery  = "query"
	InHeader = "header"
)

// Field is one JSON field of an input type.
type Field struct {
	Name string
	// Index is the field's index path through embedded structs.
	Index []int
	Type  reflect.Type
	// Required fields are those without omitempty or omitzero.
	Required bool
	// Nullable fields take null: pointers, lists, maps and any-JSON values.
	Nullable bool
	// In is where HTTP finds the field; Header names the header when In is
	// InHeader.
	In, Header string
	Bound      Bound
	// Elem is the type of a struct field, or of a list of structs' items,
	// decoded and checked as strictly as the top level.
	Elem *Type
}

// Type is an input type's fields, in declaration order.
type Type struct {
	Go     reflect.Type
	Fields []*Field
	byName map[string]*Field
}

// Field returns the field named name, or nil.
func (t *Type) Field(name string) *Field { return t.byName[name] }

// Bounded is an input type that declares its fields' bounds.
type Bounded interface {
	Bounds() Bounds
}

// Bounds are a type's field bounds by JSON name.
type Bounds map[string]Bound

var types sync.Map // reflect.Type → *Type

// TypeOf returns the fields of struct type t (through pointers); nil for a
// type that is not a struct. Each type is read once: every request of an
// operation decodes and checks the same type.
func TypeOf(t reflect.Type) *Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct || t == timeType {
		return nil
	}
	if v, ok := types.Load(t); ok {
		return v.(*Type)
	}
	// A placeholder first, so a type that refers to itself terminates.
	placeholder := &Type{Go: t, byName: map[string]*Field{}}
	if v, loaded := types.LoadOrStore(t, placeholder); loaded {
		return v.(*Type)
	}
	built := build(t)
	*placeholder = *built
	return placeholder
}

var (
	rawJSON  = reflect.TypeFor[json.RawMessage]()
	timeType = reflect.TypeFor[time.Time]()
	bounded  = reflect.TypeFor[Bounded]()
)

func build(t reflect.Type) *Type {
	out := &Type{Go: t, byName: map[string]*Field{}}
	bounds := Bounds{}
	var collect func(t reflect.Type, index []int)
	collect = func(t reflect.Type, index []int) {
		if t.Implements(bounded) {
			// An outer type's bounds win over those of a type it embeds,
			// which are collected later and only fill gaps.
			for name, b := range reflect.Zero(t).Interface().(Bounded).Bounds() {
				if _, ok := bounds[name]; !ok {
					bounds[name] = b
				}
			}
		}
		for i := range t.NumField() {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			at := append(append([]int(nil), index...), i)
			switch {
			case f.Anonymous && f.Type.Kind() == reflect.Struct && name == "":
				collect(f.Type, at)
				continue
			case name == "-" || !f.IsExported():
				continue
			}
			name = cmp.Or(name, f.Name)
			k := f.Type.Kind()
			field := &Field{Name: name, Index: at, Type: f.Type,
				Required: !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero"),
				Nullable: k == reflect.Pointer || k == reflect.Slice || k == reflect.Map || k == reflect.Interface || f.Type == rawJSON,
			}
			field.In, field.Header, _ = strings.Cut(f.Tag.Get("in"), "=")
			if doc := f.Tag.Get("doc"); doc != "" {
				field.Bound.doc = doc
			}
			switch {
			case k == reflect.Struct && f.Type != timeType:
				field.Elem = TypeOf(f.Type)
			case k == reflect.Pointer && f.Type.Elem().Kind() == reflect.Struct && f.Type.Elem() != timeType:
				field.Elem = TypeOf(f.Type.Elem())
			case k == reflect.Slice && f.Type != rawJSON && f.Type.Elem().Kind() == reflect.Struct && f.Type.Elem() != timeType:
				field.Elem = TypeOf(f.Type.Elem())
			}
			if _, dup := out.byName[name]; dup {
				continue // encoding/json keeps the shallower field too
			}
			out.Fields = append(out.Fields, field)
			out.byName[name] = field
		}
	}
	collect(t, nil)
	for name, b := range bounds {
		if f := out.byName[name]; f != nil {
			if b.doc == "" {
				b.doc = f.Bound.doc
			}
			f.Bound = b
		}
	}
	return out
}

// value returns the field's value in struct value v (addressable).
func (f *Field) value(v reflect.Value) reflect.Value {
	return v.FieldByIndex(f.Index)
}

// Doc is the field's description: its own, else the glossary's.
func (f *Field) Doc() string {
	if f.Bound.doc != "" {
		return f.Bound.doc
	}
	return glossary[f.Name]
}

// glossary describes fields by name where the same name means the same in
// every operation that takes it.
var glossary = map[string]string{
	"namespace":       `the namespace to act in (default "main"); your key needs a grant for it`,
	"idempotency_key": "any string of up to 128 printable ASCII characters; a retry with the same key and input returns the first answer instead of acting again (24 h)",
	"cursor":          "next_cursor of the previous page",
	"limit":           "page size (default 50)",
	"lease_token":     "the token of your lease (lease.token of the claim)",
}
