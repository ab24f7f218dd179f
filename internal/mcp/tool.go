package mcp

import (
	"context"
	"encoding/json"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/discovery"
	"github.com/tessera-dev/tessera/internal/input"
	"github.com/tessera-dev/tessera/internal/ops"
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

// toolListing is a tool as tools/list shows it.
type toolListing struct {
	Name         string         `json:"name"`
	Title        string         `json:"title"`
	Description  string         `json:"description"`
	InputSchema  map[string]any `json:"inputSchema"`
	OutputSchema map[string]any `json:"outputSchema"`
	Annotations  annotations    `json:"annotations"`
}

// takesNamespace reports whether a tool acts in a namespace, and so takes
// the namespace argument.
func takesNamespace(o *ops.Op) bool { return o.Need().Grant }

// namespaceDoc describes the namespace argument.
const namespaceDoc = `the namespace to act in (default "main"); your key needs a grant for it`

// listing describes an operation's tool: its input schema from the input
// type (every field is an argument, with its bounds), and a terse output
// schema — the result's shape, or the error every tool may answer.
func listing(o *ops.Op) toolListing {
	in := discovery.NewSchemaSet(false)
	inSchema := in.Object(o.In)
	if takesNamespace(o) {
		inSchema["properties"].(map[string]any)["namespace"] = map[string]any{"type": "string",
			"pattern": input.NamespaceFormat.Pattern, "maxLength": 63, "description": namespaceDoc}
	}
	if defs := in.Defs(); len(defs) > 0 {
		inSchema["$defs"] = defs
	}
	out := discovery.NewSchemaSet(true)
	result := map[string]any{"type": "object"}
	if t := o.Tool.ResultType(o); t != nil {
		result = out.Object(t)
	}
	outSchema := map[string]any{"type": "object", "anyOf": []any{result, problemSchema}}
	if defs := out.Defs(); len(defs) > 0 {
		outSchema["$defs"] = defs
	}
	t := o.Tool
	return toolListing{Name: t.Name, Title: t.Title, Description: o.Description,
		InputSchema: inSchema, OutputSchema: outSchema,
		Annotations: annotations{Title: t.Title, ReadOnlyHint: t.ReadOnly, DestructiveHint: t.Destructive,
			IdempotentHint: t.Idempotent || t.ReadOnly}}
}

// problemSchema is the result of a tool that failed (ops.Problem), as
// little as tells it from a success.
var problemSchema = map[string]any{"required": []string{"status", "code", "message"},
	"properties": map[string]any{"status": map[string]any{"type": "integer"}, "code": map[string]any{"type": "string"}}}

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

// callTool runs one tools/call through the operation's one admission path
// (ops.Exec.Do), and answers its outcome as a tool result: the output, or
// the API's error as a result with isError (SPEC §11).
func (e *Endpoint) callTool(ctx context.Context, c *call) (any, *Error) {
	var name string
	var args json.RawMessage
	err := input.Members(c.msg.Params, func(member string, v json.RawMessage) error {
		switch member {
		case "name":
			return json.Unmarshal(v, &name)
		case "arguments":
			args = v
		}
		return nil
	})
	if err != nil || name == "" {
		return nil, rpcErr(CodeInvalidParams, 0, "tools/call needs params.name, a string, and params.arguments, an object")
	}
	o := ops.ByTool(name)
	if o == nil {
		return nil, rpcErr(CodeInvalidParams, 0, "unknown tool %q; tools/list names them", input.Clip(name))
	}
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	if args[0] != '{' {
		return nil, rpcErr(CodeInvalidParams, 0, "params.arguments must be an object")
	}
	if o == runTaskOp {
		return e.runTask(ctx, c, args)
	}
	res := e.do(ctx, c, o, args)
	if res.Err != nil {
		return e.result(c, ops.ProblemOf(res.Err, res.Status), true), nil
	}
	out := res.Out
	if o.Tool.Present != nil {
		if out, err = o.Tool.Present(res.Call, out); err != nil {
			f := ops.Fault(err)
			return e.result(c, ops.ProblemOf(f, ops.Status(f.Code)), true), nil
		}
	}
	if out == nil {
		out = struct{}{}
	}
	return e.result(c, out, false), nil
}

// do runs o with a tool call's arguments through the operation's one
// admission path.
func (e *Endpoint) do(ctx context.Context, c *call, o *ops.Op, args json.RawMessage) *ops.Result {
	ns, nsErr := namespaceOf(o, args)
	return e.exec.Do(ctx, o, ops.Request{Transport: "mcp", NS: ns, Keyed: c.actor != nil, Budget: c.budget, Trace: c.trace,
		Authenticate: func() (*auth.Actor, error) {
			if c.actor == nil {
				return nil, tessera.ErrUnauthorized
			}
			return c.actor, nil
		},
		Bind: func(in any, _ *auth.Actor) error {
			if nsErr != nil {
				return nsErr
			}
			return input.Decode(args, in, input.Options{All: true, Extra: func(member string, _ json.RawMessage) bool {
				return member == "namespace" && takesNamespace(o)
			}})
		}})
}

// namespaceOf reads the namespace argument of a tool that takes one (main
// when absent); a namespace that is not a string is refused when the call
// binds its input, after the key is checked.
func namespaceOf(o *ops.Op, args json.RawMessage) (string, error) {
	if !takesNamespace(o) {
		return tessera.MainNamespace, nil
	}
	var peek struct {
		Namespace json.RawMessage `json:"namespace"`
	}
	_ = json.Unmarshal(args, &peek)
	if peek.Namespace == nil || string(peek.Namespace) == "null" {
		return tessera.MainNamespace, nil
	}
	var ns string
	if json.Unmarshal(peek.Namespace, &ns) != nil {
		return tessera.MainNamespace, tessera.Invalid("namespace", "namespace must be a string")
	}
	return ns, nil
}

func (e *Endpoint) result(c *call, v any, isError bool) callResult {
	text, err := json.Marshal(v)
	if err != nil {
		text = []byte(`{"status":500,"code":"internal","message":"internal error"}`)
	}
	return callResult{resultMeta: e.meta(c), Content: []content{{Type: "text", Text: string(text)}}, StructuredContent: v, IsError: isError}
}

// Docs describes the endpoint for the discovery documents.
func (e *Endpoint) Docs() discovery.MCP {
	d := discovery.MCP{Versions: Versions}
	for _, o := range ops.Tools() {
		d.Tools = append(d.Tools, discovery.MCPTool{Name: o.Tool.Name, Description: o.Description, NeedsKey: !o.Keyless()})
	}
	return d
}
