package discovery

import (
	"cmp"
	"encoding/json"
	"iter"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Route describes one HTTP route for the API description. The HTTP adapter
// builds these from the same table it registers handlers from, so a route
// cannot be served without being described.
type Route struct {
	Method string
	// Path is the main-namespace path, with {name} path parameters.
	Path string
	// Namespaced routes also exist under /ns/{namespace}.
	Namespaced bool
	Summary    string
	// Auth is "key" (any valid key), "admin", "public" (no key), or an
	// action scope the key needs besides the namespace grant.
	Auth string
	// In and Out are zero values of the request body and the success
	// response; nil means none. A struct In of a GET route, or any field
	// of In tagged `query:"name"`, describes query parameters instead.
	In, Out any
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
	// JSONRPC marks a JSON-RPC transport (MCP, SPEC §11): In and Out are
	// one message, and the body and its answer may be a batch of them; a
	// body of notifications only is answered 202 with none; a 400 may be
	// a JSON-RPC error rather than the error body.
	JSONRPC bool
}

// Rules are the bounds the server enforces that Go types cannot say, as
// JSON Schema keywords merged into the generated schemas: by the Go type
// whose field (by JSON or query name) they bound, and by the name of a
// path or query parameter that means the same on every route.
type Rules struct {
	Fields map[reflect.Type]map[string]map[string]any
	Params map[string]map[string]any
}

// merge adds rule's keywords to schema (to its non-null branch when the
// field is nullable) and returns it.
func merge(schema, rule map[string]any) map[string]any {
	if len(rule) == 0 {
		return schema
	}
	target := schema
	if alts, ok := schema["anyOf"].([]any); ok {
		target = alts[0].(map[string]any)
	}
	for k, v := range rule {
		target[k] = v
	}
	return schema
}

var (
	rawJSON  = reflect.TypeFor[json.RawMessage]()
	timeType = reflect.TypeFor[time.Time]()
	paramRE  = regexp.MustCompile(`\{([a-z0-9_]+)\}`)
)

// schemas builds JSON Schema 2020-12 (as OpenAPI 3.1 uses it) from Go
// types, collecting named structs as components under ref.
type schemas struct {
	components map[string]any
	// ref is the JSON pointer named structs are referred to under.
	ref string
	// describe, if set, gives the description of a field that has no doc
	// tag, by its JSON name.
	describe func(field string) string
	rules    Rules
}

func (s *schemas) of(t reflect.Type) map[string]any {
	if t == rawJSON {
		return map[string]any{"description": "any JSON value"}
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
			s.components[name] = s.object(t)
		}
		return map[string]any{"$ref": s.ref + name}
	case reflect.Interface:
		return map[string]any{}
	}
	return map[string]any{}
}

// fields yields a struct's fields as encoding/json sees them: embedded
// structs flattened into their parent.
func fields(t reflect.Type) iter.Seq[reflect.StructField] {
	return func(yield func(reflect.StructField) bool) {
		for f := range t.Fields() {
			if f.Anonymous && f.Type.Kind() == reflect.Struct {
				for inner := range fields(f.Type) {
					if !yield(inner) {
						return
					}
				}
				continue
			}
			if !yield(f) {
				return
			}
		}
	}
}

// object describes a struct's JSON fields.
func (s *schemas) object(t reflect.Type) map[string]any {
	props := map[string]any{}
	var required []string
	for f := range fields(t) {
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		prop := merge(s.of(f.Type), s.rules.Fields[t][name])
		if doc := f.Tag.Get("doc"); doc != "" {
			prop = withDescription(prop, doc)
		} else if s.describe != nil {
			if doc := s.describe(name); doc != "" {
				prop = withDescription(prop, doc)
			}
		}
		props[name] = prop
		if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") {
			required = append(required, name)
		}
	}
	// The server refuses fields it does not know (SPEC §5) and sends none
	// but these.
	o := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		sort.Strings(required)
		o["required"] = required
	}
	return o
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

// queryParams lists the query parameters a GET route's In struct declares.
func (s *schemas) queryParams(in any) []any {
	if in == nil {
		return nil
	}
	t := reflect.TypeOf(in)
	if t.Kind() != reflect.Struct {
		return nil
	}
	var out []any
	for f := range fields(t) {
		name := f.Tag.Get("query")
		if name == "" {
			continue
		}
		typ := "string"
		if k := f.Type.Kind(); k >= reflect.Int && k <= reflect.Int64 {
			typ = "integer"
		}
		rule := s.rules.Fields[t][name]
		if rule == nil {
			rule = s.rules.Params[name]
		}
		out = append(out, map[string]any{"name": name, "in": "query", "required": false,
			"description": f.Tag.Get("doc"), "schema": merge(map[string]any{"type": typ}, rule)})
	}
	return out
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
	sc := &schemas{components: map[string]any{}, ref: "#/components/schemas/", rules: cfg.Rules}
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
	var params []any
	for _, m := range paramRE.FindAllStringSubmatch(path, -1) {
		desc := "resource id"
		if m[1] == "namespace" {
			desc = "namespace name: ^[a-z0-9][a-z0-9-]{0,62}$"
		}
		params = append(params, map[string]any{"name": m[1], "in": "path", "required": true,
			"description": desc, "schema": merge(map[string]any{"type": "string"}, sc.rules.Params[m[1]])})
	}
	params = append(params, sc.queryParams(r.In)...)
	if len(params) > 0 {
		op["parameters"] = params
	}
	binary := map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}}
	switch {
	case r.RawBody:
		// Any bytes, whatever they are labeled (or not).
		op["requestBody"] = map[string]any{"required": true, "content": map[string]any{"*/*": binary}}
	case r.In != nil && r.Method != "GET" && r.Method != "DELETE":
		op["requestBody"] = map[string]any{"required": false, "content": map[string]any{
			"application/json": map[string]any{"schema": sc.of(reflect.TypeOf(r.In))}}}
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
		content := map[string]any{"application/json": map[string]any{"schema": sc.of(reflect.TypeOf(r.Out))}}
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
	if r.JSONRPC {
		msg := sc.of(reflect.TypeOf(r.In))
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
