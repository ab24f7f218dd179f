// Package elicit owns the restricted JSON Schema of an MCP elicitation
// form — a flat object of string, number, integer, boolean, single-select
// and multi-select fields — as a gate asks for an answer with it: checking
// that a schema is one, and that an answer's content matches it, with
// errors that name the field.
package elicit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/mail"
	"net/url"
	"slices"
	"sort"
	"time"
	"unicode/utf8"
)

// MaxFields bounds a form's fields, and MaxOptions a field's choices.
const (
	MaxFields  = 32
	MaxOptions = 100
)

// Schema is a checked form schema.
type Schema struct {
	Type       string            `json:"type"`
	Properties map[string]*Field `json:"properties"`
	Required   []string          `json:"required,omitempty"`
}

// Field is one property of a form. Only the keywords of the elicitation
// subset are read; annotations (title, description, default) pass.
type Field struct {
	Type      string   `json:"type"`
	MinLength *int     `json:"minLength,omitempty"`
	MaxLength *int     `json:"maxLength,omitempty"`
	Format    string   `json:"format,omitempty"`
	Minimum   *float64 `json:"minimum,omitempty"`
	Maximum   *float64 `json:"maximum,omitempty"`
	Enum      []string `json:"enum,omitempty"`
	OneOf     []Option `json:"oneOf,omitempty"`
	Items     *Items   `json:"items,omitempty"`
	MinItems  *int     `json:"minItems,omitempty"`
	MaxItems  *int     `json:"maxItems,omitempty"`
}

// Option is a titled choice (oneOf/anyOf of {const, title}).
type Option struct {
	Const string `json:"const"`
	Title string `json:"title,omitempty"`
}

// Items are a multi-select's choices.
type Items struct {
	Type  string   `json:"type,omitempty"`
	Enum  []string `json:"enum,omitempty"`
	AnyOf []Option `json:"anyOf,omitempty"`
}

// Empty is the schema of a form with no fields: an approval.
var Empty = json.RawMessage(`{"type":"object","properties":{}}`)

// Parse checks that raw is a form schema of the elicitation subset.
func Parse(raw json.RawMessage) (*Schema, error) {
	var s Schema
	d := json.NewDecoder(bytes.NewReader(raw))
	if err := d.Decode(&s); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	if s.Type != "object" {
		return nil, fmt.Errorf(`schema: type must be "object"`)
	}
	if len(s.Properties) > MaxFields {
		return nil, fmt.Errorf("schema: at most %d properties", MaxFields)
	}
	for name, f := range s.Properties {
		if f == nil {
			return nil, fmt.Errorf("schema: property %q is null", name)
		}
		if err := f.check(); err != nil {
			return nil, fmt.Errorf("schema: property %q: %w", name, err)
		}
	}
	for _, r := range s.Required {
		if s.Properties[r] == nil {
			return nil, fmt.Errorf("schema: required %q is not a property", r)
		}
	}
	return &s, nil
}

func (f *Field) check() error {
	switch f.Type {
	case "string":
		switch f.Format {
		case "", "email", "uri", "date", "date-time":
		default:
			return fmt.Errorf("format %q is not email, uri, date or date-time", f.Format)
		}
		if len(f.Enum) > MaxOptions || len(f.OneOf) > MaxOptions {
			return fmt.Errorf("at most %d choices", MaxOptions)
		}
	case "number", "integer", "boolean":
	case "array":
		if f.Items == nil || len(f.Items.Enum)+len(f.Items.AnyOf) == 0 {
			return fmt.Errorf("an array is a multi-select: items needs enum or anyOf")
		}
		if len(f.Items.Enum) > MaxOptions || len(f.Items.AnyOf) > MaxOptions {
			return fmt.Errorf("at most %d choices", MaxOptions)
		}
	default:
		return fmt.Errorf("type %q is not string, number, integer, boolean or array (forms are flat)", f.Type)
	}
	return nil
}

// Validate checks content (a JSON object) against s, naming the first
// field that does not match, in name order.
func (s *Schema) Validate(content json.RawMessage) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(content, &obj); err != nil || obj == nil {
		return fmt.Errorf("content must be a JSON object")
	}
	for _, r := range s.Required {
		if _, ok := obj[r]; !ok {
			return fmt.Errorf("field %q is required", r)
		}
	}
	names := make([]string, 0, len(obj))
	for name := range obj {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		f := s.Properties[name]
		if f == nil {
			return fmt.Errorf("field %q is not in the schema", name)
		}
		if err := f.validate(obj[name]); err != nil {
			return fmt.Errorf("field %q: %w", name, err)
		}
	}
	return nil
}

func (f *Field) validate(v json.RawMessage) error {
	switch f.Type {
	case "string":
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return fmt.Errorf("must be a string")
		}
		return f.validString(s)
	case "number", "integer":
		var n float64
		if err := json.Unmarshal(v, &n); err != nil {
			return fmt.Errorf("must be a number")
		}
		if f.Type == "integer" && n != math.Trunc(n) {
			return fmt.Errorf("must be an integer")
		}
		if f.Minimum != nil && n < *f.Minimum {
			return fmt.Errorf("must be at least %v", *f.Minimum)
		}
		if f.Maximum != nil && n > *f.Maximum {
			return fmt.Errorf("must be at most %v", *f.Maximum)
		}
	case "boolean":
		var b bool
		if err := json.Unmarshal(v, &b); err != nil {
			return fmt.Errorf("must be true or false")
		}
	case "array":
		var list []string
		if err := json.Unmarshal(v, &list); err != nil {
			return fmt.Errorf("must be an array of strings")
		}
		if f.MinItems != nil && len(list) < *f.MinItems {
			return fmt.Errorf("must have at least %d items", *f.MinItems)
		}
		if f.MaxItems != nil && len(list) > *f.MaxItems {
			return fmt.Errorf("must have at most %d items", *f.MaxItems)
		}
		for _, s := range list {
			if !choice(s, f.Items.Enum, f.Items.AnyOf) {
				return fmt.Errorf("%q is not one of the choices", s)
			}
		}
	}
	return nil
}

func (f *Field) validString(s string) error {
	n := utf8.RuneCountInString(s)
	if f.MinLength != nil && n < *f.MinLength {
		return fmt.Errorf("must be at least %d characters", *f.MinLength)
	}
	if f.MaxLength != nil && n > *f.MaxLength {
		return fmt.Errorf("must be at most %d characters", *f.MaxLength)
	}
	if (len(f.Enum) > 0 || len(f.OneOf) > 0) && !choice(s, f.Enum, f.OneOf) {
		return fmt.Errorf("%q is not one of the choices", s)
	}
	var bad bool
	switch f.Format {
	case "email":
		_, err := mail.ParseAddress(s)
		bad = err != nil
	case "uri":
		u, err := url.Parse(s)
		bad = err != nil || u.Scheme == ""
	case "date":
		_, err := time.Parse(time.DateOnly, s)
		bad = err != nil
	case "date-time":
		_, err := time.Parse(time.RFC3339, s)
		bad = err != nil
	}
	if bad {
		return fmt.Errorf("must have format %s", f.Format)
	}
	return nil
}

func choice(s string, enum []string, options []Option) bool {
	return slices.Contains(enum, s) || slices.ContainsFunc(options, func(o Option) bool { return o.Const == s })
}
