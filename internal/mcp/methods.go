package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/input"
	"github.com/tessera-dev/tessera/internal/ops"
)

// call is one message on its way through the endpoint.
type call struct {
	msg   *Message
	actor *auth.Actor
	// headerVersion is the MCP-Protocol-Version header ("" if absent).
	headerVersion string
	// header is the request's headers when the message is the body's only
	// one (the standard headers describe one message); nil in a batch.
	header http.Header
	// modern is set once the message is known to be on the 2026-07-28 lane.
	modern bool
	// tasks is set when the request declares the tasks extension (tasks.go).
	tasks bool
	// budget is the long-poll time left to the request's calls.
	budget *ops.Budget
	// trace is the HTTP request's trace context (its traceparent and
	// tracestate headers), nil for none.
	trace *core.Trace
}

// requestMeta is the part of any request's params this layer reads before
// dispatching: the per-request _meta of 2026-07-28.
type requestMeta struct {
	Meta map[string]json.RawMessage `json:"_meta"`
}

// handle answers one message, or returns nil for one that gets no answer
// (a notification or a response).
func (e *Endpoint) handle(ctx context.Context, c *call) *response {
	m := c.msg
	if m.Bad != nil {
		return errorResponse(m.ID, m.Bad)
	}
	if !m.IsCall() {
		return nil // notifications are accepted whatever they say (202)
	}
	if err := e.checkLane(c); err != nil {
		return errorResponse(m.ID, err)
	}
	if err := checkStandardHeaders(c); err != nil {
		return errorResponse(m.ID, err)
	}
	result, err := e.dispatch(ctx, c)
	if err != nil {
		if err.Code == CodeMethodNotFound && c.modern {
			err.status = http.StatusNotFound // 2026-07-28: unknown methods are 404
		}
		return errorResponse(m.ID, err)
	}
	return &response{JSONRPC: "2.0", ID: m.ID, Result: result}
}

// checkLane decides which revision a request speaks, by its
// MCP-Protocol-Version header (absent: 2025-03-26) and, on 2026-07-28, the
// _meta every request carries; initialize belongs to the handshake
// revisions whatever the header says.
func (e *Endpoint) checkLane(c *call) *Error {
	if c.msg.Method == "initialize" {
		return nil
	}
	var p requestMeta
	if c.msg.Params != nil && json.Unmarshal(c.msg.Params, &p) != nil {
		return rpcErr(CodeInvalidParams, http.StatusBadRequest, "params._meta must be an object")
	}
	var metaVersion string
	if v, ok := p.Meta[metaProtocolVersion]; ok && json.Unmarshal(v, &metaVersion) != nil {
		return rpcErr(CodeInvalidParams, http.StatusBadRequest, "_meta %s must be a string", metaProtocolVersion)
	}
	if metaVersion == "" && c.headerVersion != Version20260728 {
		return nil // a 2025 request
	}
	switch {
	case metaVersion == "":
		return rpcErr(CodeInvalidParams, http.StatusBadRequest, "a %s request carries _meta %s", Version20260728, metaProtocolVersion)
	case !slices.Contains(Versions, metaVersion):
		return unsupportedVersion(metaVersion)
	case metaVersion != c.headerVersion:
		return rpcErr(CodeHeaderMismatch, http.StatusBadRequest, "Header mismatch: MCP-Protocol-Version %q does not match _meta %s %q",
			input.Clip(c.headerVersion), metaProtocolVersion, input.Clip(metaVersion))
	}
	if metaVersion != Version20260728 {
		return nil
	}
	if caps, ok := p.Meta[metaClientCapabilities]; !ok || len(caps) == 0 || caps[0] != '{' {
		return rpcErr(CodeInvalidParams, http.StatusBadRequest, "a %s request carries _meta %s (an object)", Version20260728, metaClientCapabilities)
	}
	c.modern = true
	c.tasks = declaresTasks(p.Meta[metaClientCapabilities])
	return nil
}

// checkStandardHeaders holds Mcp-Method and Mcp-Name to the body: required
// on 2026-07-28, and never allowed to disagree with it on any revision,
// since an intermediary may route by them.
func checkStandardHeaders(c *call) *Error {
	if c.header == nil {
		return nil
	}
	method, hasMethod := c.header.Get("Mcp-Method"), len(c.header.Values("Mcp-Method")) > 0
	if c.modern && !hasMethod {
		return rpcErr(CodeHeaderMismatch, http.StatusBadRequest, "Header mismatch: a %s request carries an Mcp-Method header", Version20260728)
	}
	if hasMethod && method != c.msg.Method {
		return rpcErr(CodeHeaderMismatch, http.StatusBadRequest, "Header mismatch: Mcp-Method header value %q does not match body value %q", input.Clip(method), input.Clip(c.msg.Method))
	}
	// Mcp-Name is a tool call's tool, and the task a tasks/* call follows.
	var p struct {
		Name   string `json:"name"`
		TaskID string `json:"taskId"`
	}
	switch {
	case c.msg.Method == "tools/call":
		_ = json.Unmarshal(c.msg.Params, &p)
	case taskMethodName(c.msg.Method):
		_ = json.Unmarshal(c.msg.Params, &p)
		p.Name = p.TaskID
	default:
		return nil
	}
	names := c.header.Values("Mcp-Name")
	if len(names) == 0 {
		if c.modern {
			return rpcErr(CodeHeaderMismatch, http.StatusBadRequest, "Header mismatch: a %s %s carries an Mcp-Name header", Version20260728, c.msg.Method)
		}
		return nil
	}
	name, ok := decodeHeaderValue(names[0])
	if !ok || name != p.Name {
		return rpcErr(CodeHeaderMismatch, http.StatusBadRequest, "Header mismatch: Mcp-Name header value %q does not match body value %q", input.Clip(names[0]), input.Clip(p.Name))
	}
	return nil
}

// decodeHeaderValue undoes the revision's =?base64?…?= sentinel encoding.
func decodeHeaderValue(v string) (string, bool) {
	inner, ok := strings.CutPrefix(v, "=?base64?")
	if !ok {
		return v, true
	}
	inner, ok = strings.CutSuffix(inner, "?=")
	if !ok {
		return "", false
	}
	b, err := base64.StdEncoding.DecodeString(inner)
	return string(b), err == nil
}

// resultMeta is what every 2026-07-28 result carries.
type resultMeta struct {
	ResultType string          `json:"resultType,omitempty"`
	Meta       *serverInfoMeta `json:"_meta,omitempty"`
}

type serverInfoMeta struct {
	ServerInfo implementation `json:"io.modelcontextprotocol/serverInfo"`
}

// cacheHints are the 2026-07-28 caching fields of cacheable results. The
// tool list and the discovery answer come from configuration alone and are
// the same for every caller, so shared caches may keep them.
type cacheHints struct {
	TTLMs      *int   `json:"ttlMs,omitempty"`
	CacheScope string `json:"cacheScope,omitempty"`
}

// CacheTTLMs is how long the tool list and discovery answer stay fresh:
// they change only with a new release, so as long as the discovery
// documents' max-age.
const CacheTTLMs = 300_000

type implementation struct {
	Name    string `json:"name"`
	Title   string `json:"title,omitempty"`
	Version string `json:"version"`
}

func (e *Endpoint) serverInfo() implementation {
	return implementation{Name: "tessera", Title: "Tessera", Version: e.cfg.Version}
}

func (e *Endpoint) meta(c *call) resultMeta {
	if !c.modern {
		return resultMeta{}
	}
	return resultMeta{ResultType: "complete", Meta: &serverInfoMeta{ServerInfo: e.serverInfo()}}
}

func (e *Endpoint) cache(c *call) cacheHints {
	if !c.modern {
		return cacheHints{}
	}
	ttl := CacheTTLMs
	return cacheHints{TTLMs: &ttl, CacheScope: "public"}
}

// capabilities are the server's: tools, whose list never changes while it
// runs.
var capabilities = map[string]any{"tools": map[string]any{"listChanged": false}}

// discoverCapabilities are the 2026-07-28 lane's: the tools and the tasks
// extension (tasks.go).
var discoverCapabilities = map[string]any{"tools": capabilities["tools"], "extensions": tasksCapability}

func (e *Endpoint) dispatch(ctx context.Context, c *call) (any, *Error) {
	switch c.msg.Method {
	case "initialize":
		return e.initialize(c)
	case "ping":
		return struct{ resultMeta }{e.meta(c)}, nil
	case "server/discover":
		return struct {
			resultMeta
			cacheHints
			SupportedVersions []string       `json:"supportedVersions"`
			Capabilities      map[string]any `json:"capabilities"`
			ServerInfo        implementation `json:"serverInfo"`
			Instructions      string         `json:"instructions"`
		}{e.meta(c), e.cache(c), Versions, discoverCapabilities, e.serverInfo(), ops.Instructions}, nil
	case "tools/list":
		var p struct {
			Cursor string `json:"cursor"`
		}
		if c.msg.Params != nil && json.Unmarshal(c.msg.Params, &p) != nil {
			return nil, rpcErr(CodeInvalidParams, 0, "params.cursor must be a string")
		}
		if p.Cursor != "" {
			return nil, rpcErr(CodeInvalidParams, 0, "unknown cursor: the tool list has one page")
		}
		return struct {
			resultMeta
			cacheHints
			Tools []toolListing `json:"tools"`
		}{e.meta(c), e.cache(c), e.listed}, nil
	case "tools/call":
		return e.callTool(ctx, c)
	case listenMethod:
		return nil, rpcErr(CodeInvalidRequest, 0, "%s opens a stream: send it as a request of its own, not in a batch", listenMethod)
	case "tasks/get", "tasks/update", "tasks/cancel":
		if c.modern {
			return e.taskMethod(ctx, c)
		}
	}
	return nil, rpcErr(CodeMethodNotFound, 0, "method %q not found; this server offers initialize, ping, server/discover, tools/list and tools/call", input.Clip(c.msg.Method))
}

func (e *Endpoint) initialize(c *call) (any, *Error) {
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if c.msg.Params == nil || json.Unmarshal(c.msg.Params, &p) != nil || p.ProtocolVersion == "" {
		return nil, rpcErr(CodeInvalidParams, 0, "initialize needs params.protocolVersion, a string")
	}
	version := p.ProtocolVersion
	if !slices.Contains(handshakeVersions, version) {
		version = handshakeVersions[0]
	}
	return struct {
		ProtocolVersion string         `json:"protocolVersion"`
		Capabilities    map[string]any `json:"capabilities"`
		ServerInfo      implementation `json:"serverInfo"`
		Instructions    string         `json:"instructions"`
	}{version, capabilities, e.serverInfo(), ops.Instructions}, nil
}
