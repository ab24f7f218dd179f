// Package ops declares every operation of Tessera's API once — its name,
// HTTP route, MCP tool, input and output types, the bounds of its input
// (on the input types, package input), a summary and a description — and
// runs every call of one through a single admission path: the key, the
// namespace grant and action scope, a session's request quota, the input's
// decoding and bounds, the core, and one point that counts, logs and
// measures the outcome and maps any error to the API's error.
//
// The transports only decode and encode: internal/httpapi registers its
// routes from Table and internal/mcp lists its tools from it, and both
// hand each call to Exec.Do. The API description, the tool schemas and
// the discovery documents are derived from the same table.
package ops

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/input"
)

// Op is one operation.
type Op struct {
	// Name names the operation in audit events, counters, metrics and
	// logs, and is what a key is checked against (core.NeedOf).
	Name string
	// Summary is one line; Description what a person or a model needs to
	// use the operation well (the MCP tool's description).
	Summary, Description string
	// HTTP is the operation's route; nil when it is MCP-only.
	HTTP *Route
	// Tool is the operation's MCP tool; nil when it is HTTP-only.
	Tool *Tool
	// Only says why the operation is on one transport only.
	Only string
	// Public operations need no key for the main namespace (SPEC §3.2).
	Public bool
	// In and Out are the input and output types; In is an input struct
	// (package input), Out what the operation answers on success (nil
	// for none).
	In, Out reflect.Type
	run     func(ctx context.Context, c *Call, in any) (any, error)
}

// Route is an operation's HTTP route.
type Route struct {
	Method string
	// Path is the main namespace's path, with {name} parameters named as
	// the input's fields; Namespaced routes also exist under
	// /ns/{namespace}.
	Path       string
	Namespaced bool
	// Status is the success status; Also lists others with the same body,
	// chosen by StatusOf.
	Status   int
	Also     []int
	StatusOf func(out any) int
	// Empty, when set, says whether an output is an empty answer: 204 with
	// no body and the headers it returns (an empty claim's Retry-After).
	Empty     func(out any) (http.Header, bool)
	NoContent string
	// RawBody routes take their body as bytes (Call.Body); RawResponse
	// routes answer bytes (a *Blob), HTML routes a page for browsers.
	RawBody, RawResponse, HTML bool
	// Stream routes answer Server-Sent Events, written by the operation
	// as they come (Call.Events); Out is one event's data.
	Stream bool
}

// Tool is an operation's MCP tool.
type Tool struct {
	Name, Title string
	// The honest hints of MCP's tool annotations.
	ReadOnly, Destructive, Idempotent bool
	// Out and Present, when set, are the tool's result where it is not the
	// operation's output (bytes become base64 in JSON).
	Out     reflect.Type
	Present func(c *Call, out any) (any, error)
	// AnyResult says the tool's result is any JSON object: run_task's
	// is what the worker submits.
	AnyResult bool
}

// ResultType is the type of the tool's result; nil for any object.
func (t *Tool) ResultType(op *Op) reflect.Type {
	switch {
	case t.AnyResult:
		return nil
	case t.Out != nil:
		return t.Out
	}
	return op.Out
}

// Need is what the operation needs of a key.
func (op *Op) Need() core.Need { return core.NeedOf(op.Name) }

// Input returns the operation's input type.
func (op *Op) Input() *input.Type { return input.TypeOf(op.In) }

// NewInput returns a pointer to a zero input of the operation.
func (op *Op) NewInput() any { return reflect.New(op.In).Interface() }

// Call is one call of an operation inside the core's reach: who calls, in
// which namespace, and what the transport carries beside the input.
type Call struct {
	Actor *auth.Actor
	NS    string
	// Body is the request's bytes on a RawBody route.
	Body io.Reader
	// Events is where a Stream route writes.
	Events core.EventSink
	// Transport is "http" or "mcp".
	Transport string
	// Trace is the caller's trace context, nil for none (Request.Trace).
	Trace  *core.Trace
	core   *core.Service
	budget *Budget
	// PublicURL is where clients reach the server, for links in answers.
	PublicURL string
}

// Wait bounds a long-poll's wait, asked of a call that may wait at most
// most, by what is left of the request's budget: a batch of calls shares
// one (Budget), so a batch of long-polls holds its connection no longer
// than the longest of them may.
func (c *Call) Wait(asked, most time.Duration) time.Duration {
	if c.budget == nil {
		return asked
	}
	return c.budget.allow(asked, most)
}

// waitSeconds is Wait of a claim's wait_seconds.
func (c *Call) waitSeconds(asked int) int {
	return int(c.Wait(time.Duration(asked)*time.Second, core.MaxClaimWait*time.Second).Seconds())
}

// op declares an operation with a typed run function.
func op[In any, Out any](o Op, run func(ctx context.Context, c *Call, in *In) (Out, error)) *Op {
	o.In = reflect.TypeFor[In]()
	o.Out = reflect.TypeFor[Out]()
	for o.Out.Kind() == reflect.Pointer {
		o.Out = o.Out.Elem()
	}
	if o.Out == reflect.TypeFor[none]() {
		o.Out = nil
	}
	o.run = func(ctx context.Context, c *Call, in any) (any, error) {
		out, err := run(ctx, c, in.(*In))
		if err != nil {
			return nil, err
		}
		return out, nil
	}
	if o.HTTP != nil && o.HTTP.Status == 0 {
		o.HTTP.Status = http.StatusOK
	}
	return &o
}

// none is the input or output of an operation that has none.
type none struct{}

// Table is every operation, in the order the documents list them.
var Table []*Op

var (
	byName, byTool map[string]*Op
	tools, routes  []*Op
)

// init builds the table: some operations describe the table itself
// (explain_access_modes), which a variable's initializer may not.
func init() {
	Table = slices.Concat(accessOps, taskOps, claimOps, consoleOps, fleetOps, recordOps, blobOps, auditOps, adminOps, publicOps)
	byName = index(func(o *Op) string { return o.Name })
	byTool = index(func(o *Op) string {
		if o.Tool == nil {
			return ""
		}
		return o.Tool.Name
	})
	for _, o := range Table {
		if o.Tool != nil {
			tools = append(tools, o)
		}
		if o.HTTP != nil {
			routes = append(routes, o)
		}
	}
}

func index(key func(*Op) string) map[string]*Op {
	m := map[string]*Op{}
	for _, o := range Table {
		k := key(o)
		if k == "" {
			continue
		}
		if m[k] != nil {
			panic(fmt.Sprintf("ops: %q declared twice", k))
		}
		m[k] = o
	}
	return m
}

// Named returns the operation named name, or nil.
func Named(name string) *Op { return byName[name] }

// ByTool returns the operation behind MCP tool name, or nil.
func ByTool(name string) *Op { return byTool[name] }

// Tools returns the operations that are MCP tools, in table order.
func Tools() []*Op { return tools }

// Routes returns the operations that are HTTP routes, in table order.
func Routes() []*Op { return routes }

// Keyless reports whether the operation never takes a key.
func (op *Op) Keyless() bool { return op.Need().Keyless }

// Auth says in words what a key needs for the operation: "public", "key"
// (any valid key), "admin", "namespace grant", or an action scope beside
// the grant.
func (op *Op) Auth() string {
	need := op.Need()
	switch {
	case need.Keyless || op.Public:
		return "public"
	case !need.Grant && need.Action == "":
		return "key"
	case need.Action == "":
		return "namespace grant"
	}
	return string(need.Action)
}

// pathParams are the names of a route's {parameters}.
func (r *Route) pathParams() []string {
	var out []string
	for part := range strings.SplitSeq(r.Path, "/") {
		if name, ok := strings.CutPrefix(part, "{"); ok {
			out = append(out, strings.TrimSuffix(name, "}"))
		}
	}
	return out
}
