package discovery

import "reflect"

// SchemaSet describes Go types as self-contained JSON Schema 2020-12
// documents, with the same rules as the OpenAPI description (so a type is
// described the same way wherever it appears): named structs are collected
// under $defs. The MCP tool schemas are built with it.
type SchemaSet struct {
	s schemas
}

// NewSchemaSet returns an empty set. describe, if not nil, gives the
// description of a struct field without a doc tag, by its JSON name.
func NewSchemaSet(describe func(field string) string) *SchemaSet {
	return &SchemaSet{s: schemas{components: map[string]any{}, ref: "#/$defs/", describe: describe}}
}

// Object returns the schema of struct type t inline (not as a reference),
// as the root of a document must be; the types it refers to land in Defs.
func (ss *SchemaSet) Object(t reflect.Type) map[string]any { return ss.s.object(t) }

// Defs returns the named structs described so far, for the document's
// $defs.
func (ss *SchemaSet) Defs() map[string]any { return ss.s.components }
