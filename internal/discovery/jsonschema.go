package discovery

import (
	"reflect"

	"github.com/tessera-dev/tessera/internal/input"
)

// SchemaSet describes Go types as self-contained JSON Schema 2020-12
// documents, with the same rules as the OpenAPI description (so a type is
// described the same way wherever it appears): named structs are collected
// under $defs. The MCP tool schemas are built with it.
type SchemaSet struct {
	s schemas
}

// NewSchemaSet returns an empty set. A terse set describes shapes only:
// no descriptions, objects left open.
func NewSchemaSet(terse bool) *SchemaSet {
	return &SchemaSet{s: schemas{components: map[string]any{}, ref: "#/$defs/", terse: terse}}
}

// Object returns the schema of struct type t inline (not as a reference),
// as the root of a document must be; the types it refers to land in Defs.
func (ss *SchemaSet) Object(t reflect.Type) map[string]any { return ss.s.object(t, nil) }

// Field describes one input field, as Object describes it among its
// struct's.
func (ss *SchemaSet) Field(f *input.Field) map[string]any { return ss.s.field(f) }

// Defs returns the named structs described so far, for the document's
// $defs.
func (ss *SchemaSet) Defs() map[string]any { return ss.s.components }
