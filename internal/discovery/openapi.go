package discovery

import (
	"cmp"
	"encoding/json"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tessera-dev/tessera/internal/input"
)

// Route describes one HTTP route for the API description. The HTTP adapter
// builds these from the operation table it registers handlers from, so a
// route cannot be served without being described.
type Route struct {
	Method string
	// Path is the main-namespace path, with {name} path parameters.
	Path string
	// Namespaced routes also exist under /ns/{namespace}.
	Namespaced bool
	Summary    string
	// Description says more, for the operation's entry.
	Description string
	// Auth is "key" (any valid key), "admin", "public" (no key), or an
	// action scope the key needs besides the namespace grant.
	Auth string
	// In is the input type (package input: its fields name where each
	// comes from, and their bounds); Out the success response's type. Nil
	// means none.
	In, Out reflect.Type
	// Status is the success status (200 if zero).
	Status int
	// RawBody marks a route whose body is raw bytes, not JSON; RawResponse
	// one whose success response is.
	RawBody, RawResponse bool
	// NoContent, when set, says why the route may also answer 204 with no
	// body.
	NoContent string
	// Also lists other success statuses answered with the same body.
	Also []int
	// RawType is the media type of a raw response ("" for
	// application/octet-stream); HTML marks a JSON route that answers
	// browsers with a page instead.
	RawType string
	HTML    bool
	// Ranges marks a raw response served with Range (206, 416) and
	// conditional requests (304).
	Ranges bool
	// Cached marks a response served with an ETag, answered 304 to a
	// matching If-None-Match.
	Cached bool
	// JSONRPC marks a JSON-RPC transport (MCP, SPEC §11): In and Out are
	// one message, and the body and its answer may be a batch of them; a
	// body of notifications only is answered 202 with none; a 400 may be
	// a JSON-RPC error rather than the error body.
	JSONRPC bool
}

var (
	rawJSON  = reflect.TypeFor[json.RawMessage]()
	timeType = reflect.TypeFor[time.Time]()
	paramRE  = regexp.MustCompile(`\{([a-z0-9_]+)\}`)
)

// schemas builds JSON Schema 2020-12 (as OpenAPI 3.1 uses it) from Go
// types, collecting named structs as components under ref. Input types
// carry their bounds (package input), which become keywords.
type schemas struct {
	components map[string]any
	// ref is the JSON pointer named structs are referred to under.
	ref string
	// terse describes the top level's shape only — each field's JSON
	// type, no descriptions, nothing required, objects left open: the MCP
	// output schemas, which a client validates results against and a model
	// reads for their shape, and which every tools/list repeats.
	terse bool
}

func (s *schemas) of(t reflect.Type) map[string]any {
	if s.terse {
		return shape(t)
	}
	if t == rawJSON {
		return map[string]any{}
	}
	if t == timeType {
		return map[string]any{"type": "string", "format": "date-time"}
	}
	switch t.Kind() {
	case reflect.Pointer:
		inner := s.of(t.Elem())
		return map[string]any{"anyOf": []any{inner, map[string]any{"type": "null"}}}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice:
		// encoding/json writes a nil slice or map as null.
		return map[string]any{"type": []string{"array", "null"}, "items": s.of(t.Elem())}
	case reflect.Array:
		return map[string]any{"type": "array", "items": s.of(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": []string{"object", "null"}, "additionalProperties": s.of(t.Elem())}
	case reflect.Struct:
		name := componentName(t)
		if _, ok := s.components[name]; !ok {
			s.components[name] = map[string]any{} // placeholder stops recursion
			s.components[name] = s.object(t, nil)
		}
		return map[string]any{"$ref": s.ref + name}
	}
	return map[string]any{}
}

// shape is the JSON type of t alone, nothing of what is inside it: a terse
// schema's fields, whose values a model reads in the result itself.
func shape(t reflect.Type) map[string]any {
	nullable := false
	if t.Kind() == reflect.Pointer {
		t, nullable = t.Elem(), true
	}
	var typ string
	switch {
	case t == rawJSON:
		return map[string]any{}
	case t == timeType || t.Kind() == reflect.String:
		typ = "string"
	case t.Kind() == reflect.Bool:
		typ = "boolean"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		typ = "integer"
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		typ = "number"
	case t.Kind() == reflect.Slice || t.Kind() == reflect.Array:
		typ, nullable = "array", nullable || t.Kind() == reflect.Slice
	case t.Kind() == reflect.Map:
		typ, nullable = "object", true
	case t.Kind() == reflect.Struct:
		typ = "object"
	default:
		return map[string]any{}
	}
	if nullable {
		return map[string]any{"type": []string{typ, "null"}}
	}
	return map[string]any{"type": typ}
}

// object describes a struct's JSON fields, those keep keeps (nil: all).
func (s *schemas) object(t reflect.Type, keep func(*input.Field) bool) map[string]any {
	props := map[string]any{}
	var required []string
	for _, f := range input.TypeOf(t).Fields {
		if keep != nil && !keep(f) {
			continue
		}
		props[f.Name] = s.field(f)
		if f.Required {
			required = append(required, f.Name)
		}
	}
	o := map[string]any{"type": "object", "properties": props}
	if s.terse {
		return o
	}
	// The server refuses fields it does not know (SPEC §5) and sends none
	// but these.
	o["additionalProperties"] = false
	if len(required) > 0 {
		sort.Strings(required)
		o["required"] = required
	}
	return o
}

// field describes one field: its type, its bound's keywords, its doc.
func (s *schemas) field(f *input.Field) map[string]any {
	prop := s.of(f.Type)
	if kw := f.Bound.Keywords(); len(kw) > 0 {
		target := prop
		if alts, ok := prop["anyOf"].([]any); ok {
			target = alts[0].(map[string]any) // the non-null branch
		}
		if items, ok := kw["items"].(map[string]any); ok {
			if inner, ok := target["items"].(map[string]any); ok {
				maps.Copy(inner, items)
			}
			delete(kw, "items")
		}
		if !f.Required && f.Type.Kind() == reflect.String {
			// An optional string left empty is absent (package input).
			if p, ok := kw["pattern"].(string); ok {
				kw["pattern"] = "^$|" + p
			}
			if e, ok := kw["enum"].([]string); ok {
				kw["enum"] = append([]string{""}, e...)
			}
		}
		maps.Copy(target, kw)
	}
	if s.terse {
		return prop
	}
	doc := f.Doc()
	if f.Type == rawJSON {
		doc = strings.TrimPrefix(doc+"; "+f.Bound.JSONDoc(), "; ")
	}
	if doc == "" {
		return prop
	}
	return withDescription(prop, doc)
}

// withDescription adds a description to a property schema. A reference is
// wrapped, since keywords beside $ref are ignored by older validators.
func withDescription(prop map[string]any, doc string) map[string]any {
	if _, ok := prop["$ref"]; ok {
		return map[string]any{"allOf": []any{prop}, "description": doc}
	}
	out := map[string]any{"description": doc}
	for k, v := range prop {
		if k != "description" {
			out[k] = v
		}
	}
	return out
}

func componentName(t reflect.Type) string {
	pkg := t.PkgPath()
	if i := strings.LastIndexByte(pkg, '/'); i >= 0 {
		pkg = pkg[i+1:]
	}
	name := t.Name()
	if name == "" {
		name = "Anonymous"
	}
	// Domain types keep their name; adapter and core types get a prefix
	// only when that keeps two types apart.
	if pkg == "tessera" {
		return name
	}
	return strings.ToUpper(pkg[:1]) + pkg[1:] + name
}

// params lists the path, query and header parameters of a route's input.
func (s *schemas) params(in reflect.Type, path string) []any {
	var out []any
	byName := map[string]*input.Field{}
	var fields []*input.Field
	if in != nil {
		fields = input.TypeOf(in).Fields
		for _, f := range fields {
			byName[f.Name] = f
		}
	}
	for _, m := range paramRE.FindAllStringSubmatch(path, -1) {
		p := map[string]any{"name": m[1], "in": "path", "required": true,
			"description": "namespace name", "schema": map[string]any{"type": "string", "pattern": input.NamespaceFormat.Pattern}}
		if f := byName[m[1]]; f != nil {
			p["description"], p["schema"] = f.Doc(), s.param(f)
		}
		out = append(out, p)
	}
	for _, f := range fields {
		switch f.In {
		case input.InQuery:
			out = append(out, map[string]any{"name": f.Name, "in": "query", "required": false,
				"description": f.Doc(), "schema": s.param(f)})
		case input.InHeader:
			out = append(out, map[string]any{"name": f.Header, "in": "header", "required": false,
				"description": f.Doc(), "schema": s.param(f)})
		}
	}
	return out
}

// param describes a parameter's value: a field's, never null nor empty (an
// absent parameter is how a parameter says nothing).
func (s *schemas) param(f *input.Field) map[string]any {
	g := *f
	g.Required = true // an empty parameter is no parameter: no "" to allow
	if g.Type.Kind() == reflect.Pointer {
		g.Type = g.Type.Elem()
	}
	return s.field(&g)
}

func isBody(f *input.Field) bool { return f.In == input.InBody }

// body describes the body of a route whose input is t: the struct it
// embeds when that holds every body field (a core type, by its name),
// else the body fields themselves.
func (s *schemas) body(t reflect.Type) map[string]any {
	var names []string
	for _, f := range input.TypeOf(t).Fields {
		if isBody(f) {
			names = append(names, f.Name)
		}
	}
	for f := range t.Fields() {
		if !f.Anonymous || f.Type.Kind() != reflect.Struct {
			continue
		}
		var inner []string
		for _, g := range input.TypeOf(f.Type).Fields {
			inner = append(inner, g.Name)
		}
		if slices.Equal(inner, names) {
			return s.of(f.Type)
		}
	}
	if t.Kind() == reflect.Struct && len(names) == len(input.TypeOf(t).Fields) && t.Name() != "" && len(names) > 0 {
		return s.of(t)
	}
	return s.object(t, isBody)
}

// errorStatuses are the failures every keyed route may answer, each with
// the error body of SPEC §5.
var errorStatuses = map[string]string{
	"400": "invalid_request: malformed JSON, unknown field or bad value",
	"401": "unauthorized: missing, malformed, unknown, expired or revoked key",
	"403": "forbidden: no grant for the namespace, or the action scope is missing",
	"404": "not_found",
	"409": "lease_lost, version_conflict, invalid_state or idempotency_conflict",
	"413": "payload_too_large",
	"429": "rate_limited, with Retry-After",
	"500": "internal",
	"503": "storage_quota_exhausted (Retry-After, reset_at) or unavailable",
}

// OpenAPI builds the OpenAPI 3.1 document of routes. Each route appears
// under /v1 and again under /ns/{namespace}/v1.
func OpenAPI(cfg Config, routes []Route, errorBody any) ([]byte, error) {
	sc := &schemas{components: map[string]any{}, ref: "#/components/schemas/"}
	errRef := sc.of(reflect.TypeOf(errorBody))
	paths := map[string]map[string]any{}
	for _, r := range routes {
		prefixes := []string{""}
		if r.Namespaced {
			prefixes = append(prefixes, "/ns/{namespace}")
		}
		for _, prefix := range prefixes {
			path := prefix + r.Path
			if paths[path] == nil {
				paths[path] = map[string]any{}
			}
			paths[path][strings.ToLower(r.Method)] = operation(sc, r, path, prefix != "", errRef)
		}
	}
	doc := map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":       "Tessera",
			"version":     cfg.Version,
			"description": "Work coordination for AI agents and other workers: namespaced task queues with leases, heartbeats and results. Every /v1 route also exists under /ns/{namespace}/v1.",
		},
		"servers": []any{map[string]any{"url": cfg.PublicURL}},
		"paths":   paths,
		"components": map[string]any{
			"schemas": sc.components,
			"securitySchemes": map[string]any{
				"bearer": map[string]any{"type": "http", "scheme": "bearer", "description": "A Tessera key: tsk_<id>_<secret>"},
			},
		},
	}
	return json.MarshalIndent(doc, "", "  ")
}

func operation(sc *schemas, r Route, path string, namespaced bool, errRef map[string]any) map[string]any {
	op := map[string]any{
		"summary":     r.Summary,
		"operationId": operationID(r.Method, path),
	}
	if r.Description != "" {
		op["description"] = r.Description
	}
	if params := sc.params(r.In, path); len(params) > 0 {
		op["parameters"] = params
	}
	binary := map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}}
	switch {
	case r.RawBody:
		// Any bytes, whatever they are labeled (or not).
		op["requestBody"] = map[string]any{"required": true, "content": map[string]any{"*/*": binary}}
	case r.In != nil && r.Method != "GET" && r.Method != "DELETE" && !r.JSONRPC:
		op["requestBody"] = map[string]any{"required": false, "content": map[string]any{
			"application/json": map[string]any{"schema": sc.body(r.In)}}}
	}
	status := r.Status
	if status == 0 {
		status = 200
	}
	ok := map[string]any{"description": "success"}
	switch {
	case r.RawResponse:
		ok["content"] = map[string]any{cmp.Or(r.RawType, "application/octet-stream"): binary}
	case r.Out != nil:
		content := map[string]any{"application/json": map[string]any{"schema": sc.of(r.Out)}}
		if r.HTML {
			content["text/html"] = map[string]any{"schema": map[string]any{"type": "string"}}
		}
		ok["content"] = content
	}
	responses := map[string]any{strconv.Itoa(status): ok}
	for _, code := range r.Also {
		responses[strconv.Itoa(code)] = ok
	}
	if r.NoContent != "" {
		responses["204"] = map[string]any{"description": r.NoContent}
	}
	errContent := map[string]any{"application/json": map[string]any{"schema": errRef}}
	if r.Ranges {
		responses["206"] = map[string]any{"description": "the ranges asked for", "content": ok["content"]}
		responses["304"] = map[string]any{"description": "not modified (If-None-Match)"}
		responses["416"] = map[string]any{"description": "invalid_request: the range cannot be satisfied", "content": errContent}
	}
	for code, desc := range errorStatuses {
		responses[code] = map[string]any{"description": desc, "content": errContent}
	}
	if r.Cached {
		responses["304"] = map[string]any{"description": "not modified (If-None-Match)"}
	}
	if r.HTML {
		// A browser refused for want of a key gets a page saying what to
		// do instead of the JSON error.
		for _, code := range []string{"401", "403"} {
			responses[code] = map[string]any{"description": errorStatuses[code] + "; a page for a browser (Accept: text/html)",
				"content": map[string]any{"application/json": errContent["application/json"], "text/html": map[string]any{"schema": map[string]any{"type": "string"}}}}
		}
	}
	if r.JSONRPC {
		msg := sc.of(r.In)
		batch := map[string]any{"application/json": map[string]any{"schema": map[string]any{
			"anyOf": []any{msg, map[string]any{"type": "array", "items": msg}}}}}
		op["requestBody"] = map[string]any{"required": true, "content": batch}
		ok["content"] = batch
		responses["202"] = map[string]any{"description": "notifications or responses only: no body"}
		responses["400"] = map[string]any{"description": errorStatuses["400"] + "; or a JSON-RPC error (parse error, invalid request, unsupported protocol version)",
			"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"anyOf": []any{errRef, msg}}}}}
	}
	op["responses"] = responses
	if r.Auth != "public" || namespaced {
		op["security"] = []any{map[string]any{"bearer": []any{}}}
	} else {
		op["security"] = []any{}
	}
	return op
}

func operationID(method, path string) string {
	var b strings.Builder
	b.WriteString(strings.ToLower(method))
	for _, part := range strings.FieldsFunc(path, func(r rune) bool { return r == '/' || r == '{' || r == '}' || r == '.' || r == '-' || r == '_' }) {
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}
