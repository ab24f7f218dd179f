// Package mcp is Tessera's MCP (Model Context Protocol) adapter: the
// JSON-RPC 2.0 layer of POST /mcp on every served revision (the stateless
// 2026-07-28 and the 2025 handshake revisions), batches, and the tool table
// whose tools call the same core methods as the HTTP handlers. It knows no
// SQL and no business rule; the HTTP adapter mounts it behind its edge
// (byte limit, Origin, key) and lends it its request decoder and its error
// status table, so every rule lives in one place.
package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// Protocol revisions, newest first. 2026-07-28 is stateless (per-request
// _meta, no handshake); the others start with initialize.
const (
	Version20260728 = "2026-07-28"
	Version20251125 = "2025-11-25"
	Version20250618 = "2025-06-18"
	Version20250326 = "2025-03-26"
)

// Versions are the revisions served, newest first.
var Versions = []string{Version20260728, Version20251125, Version20250618, Version20250326}

// handshakeVersions are the revisions initialize negotiates among:
// 2026-07-28 has no handshake.
var handshakeVersions = Versions[1:]

// Meta keys of the 2026-07-28 revision.
const (
	metaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	metaServerInfo         = "io.modelcontextprotocol/serverInfo"
)

// Edge is what the HTTP adapter lends this layer, so that request decoding
// and the error-code → status table exist once for both transports.
type Edge struct {
	// Decode reads a JSON body into dst under the API's rules (bounded
	// nesting, no unknown or repeated fields, valid UTF-8).
	Decode func(body []byte, dst any) error
	// Status is the HTTP status the API answers an error code with.
	Status func(tessera.Code) int
}

// Config is what the endpoint tells clients about itself.
type Config struct {
	// PublicURL is the server's base URL, without a trailing slash.
	PublicURL string
	Version   string
}

// Endpoint serves POST /mcp.
type Endpoint struct {
	core   *core.Service
	edge   Edge
	cfg    Config
	tools  []*tool
	byName map[string]*tool
	// listed is the tool list as tools/list answers it.
	listed []toolListing
}

// New returns the endpoint over svc.
func New(svc *core.Service, edge Edge, cfg Config) *Endpoint {
	e := &Endpoint{core: svc, edge: edge, cfg: cfg, byName: map[string]*tool{}}
	e.tools = e.toolTable()
	for _, t := range e.tools {
		e.byName[t.name] = t
		e.listed = append(e.listed, t.listing())
	}
	return e
}

// Request is one POST /mcp as the HTTP adapter hands it over, after its
// edge checks (byte limit, Origin) passed.
type Request struct {
	Header http.Header
	Body   []byte
	// Authenticate resolves the request's key: the HTTP edge's first step.
	// It is called at most once, and only when a message calls a tool that
	// needs a key, so storage-free methods never look a key up.
	Authenticate func() (*auth.Actor, error)
}

// Answer is the HTTP answer to a Request. A nil Body means none (202).
type Answer struct {
	Status int
	Body   []byte
}

// Serve answers one request. An error means the request was refused before
// any JSON-RPC work (a missing or bad key): the HTTP adapter answers it
// with its own error body, and counts it under op.
func (e *Endpoint) Serve(ctx context.Context, r Request) (answer *Answer, op string, err error) {
	msgs, batch, bad := DecodeBody(r.Body)
	if bad != nil {
		return single(errorResponse(nil, bad), bad.status), "", nil
	}
	headerVersion := r.Header.Get("Mcp-Protocol-Version")
	if headerVersion != "" && !slices.Contains(Versions, headerVersion) {
		var id json.RawMessage
		if !batch {
			id = msgs[0].ID
		}
		e := unsupportedVersion(headerVersion)
		return single(errorResponse(id, e), e.status), "", nil
	}
	if batch && (r.Header.Get("Mcp-Method") != "" || r.Header.Get("Mcp-Name") != "") {
		e := rpcErr(CodeHeaderMismatch, http.StatusBadRequest, "Mcp-Method and Mcp-Name name one message; a batch carries neither")
		return single(errorResponse(nil, e), e.status), "", nil
	}
	var actor *auth.Actor
	for i := range msgs {
		if t := e.keyedTool(&msgs[i]); t != nil {
			if actor, err = r.Authenticate(); err != nil {
				return nil, t.op, err
			}
			break
		}
	}
	var out []*response
	for i := range msgs {
		c := &call{msg: &msgs[i], actor: actor, headerVersion: headerVersion}
		if !batch {
			c.header = r.Header
		}
		if res := e.handle(ctx, c); res != nil {
			out = append(out, res)
		}
	}
	switch {
	case len(out) == 0:
		return &Answer{Status: http.StatusAccepted}, "", nil
	case !batch:
		status := http.StatusOK
		if out[0].Error != nil && out[0].Error.status != 0 {
			status = out[0].Error.status
		}
		return single(out[0], status), "", nil
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, "", err
	}
	return &Answer{Status: http.StatusOK, Body: b}, "", nil
}

func single(res *response, status int) *Answer {
	b, err := json.Marshal(res)
	if err != nil {
		b, status = []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal error"}}`), http.StatusInternalServerError
	}
	return &Answer{Status: status, Body: b}
}

func unsupportedVersion(requested string) *Error {
	e := rpcErr(CodeUnsupportedVersion, http.StatusBadRequest, "Unsupported protocol version %q; this server speaks %v", requested, Versions)
	e.Data = map[string]any{"supported": Versions, "requested": requested}
	return e
}

// keyedTool returns the tool msg calls if that tool needs a key.
func (e *Endpoint) keyedTool(msg *Message) *tool {
	if !msg.IsCall() || msg.Bad != nil || msg.Method != "tools/call" {
		return nil
	}
	var p struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(msg.Params, &p) != nil {
		return nil
	}
	if t := e.byName[p.Name]; t != nil && !t.keyless {
		return t
	}
	return nil
}
