package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"time"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/discovery"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// annotations are the MCP tool hints. Every Tessera tool acts only on
// Tessera's own state, so none is open-world.
type annotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    bool   `json:"readOnlyHint"`
	DestructiveHint bool   `json:"destructiveHint"`
	IdempotentHint  bool   `json:"idempotentHint"`
	OpenWorldHint   bool   `json:"openWorldHint"`
}

// tool is one entry of the tool table.
type tool struct {
	name, title, description string
	// keyless tools answer from configuration alone, with or without a
	// key, and never look one up.
	keyless bool
	// op names the operation in audit events and counters — the HTTP
	// route's, so a failure is counted the same way over both transports —
	// and what the key is checked against (core.NeedOf), as for the route.
	op string
	// readOnly, destructive and idempotent are the honest hints.
	readOnly, destructive, idempotent bool
	// args and out are zero values of the arguments and of the success
	// result, for the input and output schemas. args defaults to what the
	// handler decodes; an entry sets it when it decodes in two steps.
	args, out any
	run       func(ctx context.Context, c *toolCall) (any, error)
}

// toolCall is one tools/call on its way to the core.
type toolCall struct {
	actor *auth.Actor
	ns    string
	args  json.RawMessage
	edge  Edge
}

// decode reads the arguments into dst with the HTTP API's body rules.
func (c *toolCall) decode(dst any) error { return c.edge.Decode(c.args, dst) }

// toolFunc adapts a handler of typed arguments A to the table, and records
// A for the input schema unless the entry describes its arguments itself.
func toolFunc[A any](t tool, fn func(ctx context.Context, c *toolCall, a *A) (any, error)) *tool {
	if t.args == nil {
		var zero A
		t.args = zero
	}
	t.run = func(ctx context.Context, c *toolCall) (any, error) {
		var a A
		if err := c.decode(&a); err != nil {
			return nil, err
		}
		if ch, ok := any(&a).(checker); ok {
			if err := ch.check(); err != nil {
				return nil, err
			}
		}
		return fn(ctx, c, &a)
	}
	return &t
}

// checker is an argument struct with a check beyond decoding.
type checker interface{ check() error }

// nsArg is the namespace every tool takes.
type nsArg struct {
	Namespace string `json:"namespace,omitempty"`
}

// toolListing is a tool as tools/list shows it.
type toolListing struct {
	Name         string         `json:"name"`
	Title        string         `json:"title"`
	Description  string         `json:"description"`
	InputSchema  map[string]any `json:"inputSchema"`
	OutputSchema map[string]any `json:"outputSchema"`
	Annotations  annotations    `json:"annotations"`
}

func (t *tool) listing() toolListing {
	return toolListing{Name: t.name, Title: t.title, Description: t.description,
		InputSchema: inputSchema(t.args), OutputSchema: outputSchema(t.out),
		Annotations: annotations{Title: t.title, ReadOnlyHint: t.readOnly, DestructiveHint: t.destructive,
			IdempotentHint: t.idempotent || t.readOnly}}
}

// inputSchema describes a tool's arguments; unknown fields are refused,
// as in HTTP bodies.
func inputSchema(args any) map[string]any {
	set := discovery.NewSchemaSet(fieldDoc)
	s := set.Object(reflect.TypeOf(args))
	s["additionalProperties"] = false
	if defs := set.Defs(); len(defs) > 0 {
		s["$defs"] = defs
	}
	return s
}

// outputSchema describes a tool's structured result: its success value,
// or the error of a result with isError set — clients validate both.
func outputSchema(out any) map[string]any {
	set := discovery.NewSchemaSet(nil)
	s := map[string]any{
		"type":  "object",
		"anyOf": []any{set.Object(reflect.TypeOf(out)), set.Object(reflect.TypeFor[ToolError]())},
	}
	if defs := set.Defs(); len(defs) > 0 {
		s["$defs"] = defs
	}
	return s
}

// content is a tool result's text block.
type content struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// callResult is a tools/call result: the structured value, and the same
// JSON as text for clients that read only text.
type callResult struct {
	resultMeta
	Content           []content `json:"content"`
	StructuredContent any       `json:"structuredContent"`
	IsError           bool      `json:"isError,omitempty"`
}

// ToolError is the structured content of a tool result with isError set:
// the status and code the HTTP API answers the same failure with.
type ToolError struct {
	Status     int        `json:"status" doc:"the HTTP status the API gives this failure"`
	Code       string     `json:"code" doc:"the API error code, e.g. lease_lost or storage_quota_exhausted"`
	Message    string     `json:"message" doc:"what went wrong, for a person or a model"`
	Field      string     `json:"field,omitempty" doc:"the argument at fault, for invalid_request"`
	RetryAfter int        `json:"retry_after,omitempty" doc:"seconds to wait before trying again"`
	ResetAt    *time.Time `json:"reset_at,omitempty" doc:"when the storage allowance is expected to reset"`
}

func (e *Endpoint) callTool(ctx context.Context, c *call) (any, *Error) {
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if json.Unmarshal(c.msg.Params, &p) != nil || p.Name == "" {
		return nil, rpcErr(CodeInvalidParams, 0, "tools/call needs params.name, a string, and params.arguments, an object")
	}
	t := e.byName[p.Name]
	if t == nil {
		return nil, rpcErr(CodeInvalidParams, 0, "unknown tool %q; tools/list names them", p.Name)
	}
	args := p.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	if args[0] != '{' {
		return nil, rpcErr(CodeInvalidParams, 0, "params.arguments must be an object")
	}
	tc := &toolCall{actor: c.actor, args: args, edge: e.edge, ns: tessera.MainNamespace}
	out, err := e.runTool(ctx, t, tc)
	if err != nil {
		e.count(t, tc, err)
		return e.errorResult(c, err), nil
	}
	return e.result(c, out, false), nil
}

// runTool is the edge of SPEC §4 for one call, then the tool: the
// namespace, then the grant and scope the operation needs (the core's
// table, which the HTTP edge checks too), before anything else of the call
// is looked at (the key was checked for the whole request).
func (e *Endpoint) runTool(ctx context.Context, t *tool, c *toolCall) (any, error) {
	var peek struct {
		Namespace json.RawMessage `json:"namespace"`
	}
	_ = json.Unmarshal(c.args, &peek)
	if peek.Namespace != nil && string(peek.Namespace) != "null" {
		if json.Unmarshal(peek.Namespace, &c.ns) != nil || !tessera.ValidNamespace(c.ns) {
			c.ns = tessera.MainNamespace
			return nil, tessera.Invalid("namespace", "namespace must match ^[a-z0-9][a-z0-9-]{0,62}$")
		}
	}
	if !t.keyless {
		if err := core.NeedOf(t.op).Check(c.actor, c.ns); err != nil {
			return nil, err
		}
	}
	return t.run(ctx, c)
}

// count records a failed call under the tool's operation, as the HTTP
// adapter counts a failed request (SPEC §9).
func (e *Endpoint) count(t *tool, c *toolCall, err error) {
	if t.op == "" {
		return
	}
	principal := ""
	if c.actor != nil {
		principal = c.actor.Principal.ID
	}
	e.core.Count(principal, c.ns, t.op, string(tessera.ErrorCode(err)))
}

func (e *Endpoint) result(c *call, v any, isError bool) callResult {
	text, err := json.Marshal(v)
	if err != nil {
		text = []byte(`{"status":500,"code":"internal","message":"internal error"}`)
	}
	return callResult{resultMeta: e.meta(c), Content: []content{{Type: "text", Text: string(text)}}, StructuredContent: v, IsError: isError}
}

// errorResult is the one mapping from an error to a tool result: the
// API's *tessera.Error with the HTTP status its code has; anything else is
// internal and shows nothing of itself.
func (e *Endpoint) errorResult(c *call, err error) callResult {
	var te *tessera.Error
	if !errors.As(err, &te) {
		te = tessera.Errorf(tessera.CodeInternal, "internal error")
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			te = tessera.Errorf(tessera.CodeUnavailable, "the request was canceled")
		}
	}
	out := ToolError{Status: e.edge.Status(te.Code), Code: string(te.Code), Message: te.Message, Field: te.Field}
	if te.RetryAfter > 0 {
		out.RetryAfter = int(math.Ceil(te.RetryAfter.Seconds()))
	}
	if !te.ResetAt.IsZero() {
		t := te.ResetAt.UTC()
		out.ResetAt = &t
	}
	return e.result(c, out, true)
}

func checkID(kind, v string) error {
	if v == "" || len(v) > 64 {
		return tessera.NotFound(kind, v)
	}
	for _, r := range v {
		if !(r >= '0' && r <= '9' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z') {
			return tessera.NotFound(kind, v)
		}
	}
	return nil
}

// maxQueryLen bounds the arguments that are query parameters over HTTP,
// as the HTTP adapter bounds those.
const maxQueryLen = 256

func checkQuery(fields map[string]string) error {
	for name, v := range fields {
		if len(v) > maxQueryLen {
			return tessera.Invalid(name, "%s is too long", name)
		}
	}
	return nil
}

// Docs describes the endpoint for the discovery documents.
func (e *Endpoint) Docs() discovery.MCP {
	d := discovery.MCP{Versions: Versions}
	for _, t := range e.tools {
		d.Tools = append(d.Tools, discovery.MCPTool{Name: t.name, Description: t.description, NeedsKey: !t.keyless})
	}
	return d
}
