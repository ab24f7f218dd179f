// Package mcp is Tessera's MCP (Model Context Protocol) adapter: the
// JSON-RPC 2.0 layer of POST /mcp on every served revision (the stateless
// 2026-07-28 and the 2025 handshake revisions), batches, and the tools —
// the operations of package ops that are tools, listed from the one table
// and run through its one admission path. It knows no SQL and no business
// rule; the HTTP adapter mounts it behind its edge (byte limit, Origin).
package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"time"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/input"
	"github.com/tessera-dev/tessera/internal/ops"
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

// Config is what the endpoint tells clients about itself, and its bounds.
type Config struct {
	// PublicURL is the server's base URL, without a trailing slash.
	PublicURL string
	Version   string
	// BatchWait is the long-poll time the calls of one request share
	// (default DefaultBatchWait).
	BatchWait time.Duration
}

// DefaultBatchWait is a batch's long-poll budget: the longest one call may
// wait, so a batch of long-polls holds its connection no longer than one.
const DefaultBatchWait = core.MaxEventsWait * time.Second

// Endpoint serves POST /mcp.
type Endpoint struct {
	exec *ops.Exec
	cfg  Config
	// listed is the tool list as tools/list answers it; listedBytes its
	// size.
	listed      []toolListing
	listedBytes int
}

// New returns the endpoint running its tools on exec.
func New(exec *ops.Exec, cfg Config) *Endpoint {
	if cfg.BatchWait <= 0 {
		cfg.BatchWait = DefaultBatchWait
	}
	e := &Endpoint{exec: exec, cfg: cfg}
	for _, o := range ops.Tools() {
		e.listed = append(e.listed, listing(o))
	}
	b, _ := json.Marshal(e.listed)
	e.listedBytes = len(b)
	return e
}

// Request is one POST /mcp as the HTTP adapter hands it over, after its
// edge checks (byte limit, Origin) passed.
type Request struct {
	Header http.Header
	Body   []byte
	// Authenticate resolves the request's key, and holds the body to that
	// key's byte limit: the HTTP edge's first step. It is called at most
	// once, and only when a message calls a tool that needs a key, so
	// storage-free methods never look a key up. Each call then passes the
	// rest of the admission on its own (ops.Exec.Do): a batch of N calls
	// spends N of a session's requests.
	Authenticate func() (*auth.Actor, error)
}

// Answer is the HTTP answer to a Request. A nil Body means none (202),
// unless Stream is set: then the answer is an event stream (a
// subscriptions/listen), which Stream writes until it returns.
type Answer struct {
	Status int
	Body   []byte
	Stream func(ctx context.Context, out StreamOut) error
	// refuse answers a stream that failed before it opened.
	refuse func(error) *Answer
}

// Refused is the answer to a stream that failed before its first message
// (its key may not follow the namespace's events, too many streams): a
// JSON-RPC error, as any other request's.
func (a *Answer) Refused(err error) *Answer { return a.refuse(err) }

// Serve answers one request. An error means the request was refused before
// any JSON-RPC work (a missing or bad key, a body over the key's limit):
// the HTTP adapter answers it with its own error body, and counts it under
// op.
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
		if o := keyedTool(&msgs[i]); o != nil {
			if actor, err = r.Authenticate(); err != nil {
				return nil, o.Name, err
			}
			break
		}
	}
	if !batch {
		c := &call{msg: &msgs[0], actor: actor, headerVersion: headerVersion, header: r.Header, budget: ops.NewBudget(e.cfg.BatchWait), trace: ops.TraceOf(r.Header)}
		if c.msg.Method == listenMethod && c.msg.IsCall() && c.msg.Bad == nil {
			stream, err := e.listen(ctx, c)
			if err != nil {
				return single(errorResponse(c.msg.ID, err), max(err.status, http.StatusOK)), "", nil
			}
			return stream, "", nil
		}
		res := e.handle(ctx, c)
		if res == nil {
			return &Answer{Status: http.StatusAccepted}, "", nil
		}
		status := http.StatusOK
		if res.Error != nil && res.Error.status != 0 {
			status = res.Error.status
		}
		return single(res, status), "", nil
	}
	return e.serveBatch(ctx, msgs, actor, headerVersion, len(r.Body), ops.TraceOf(r.Header)), "", nil
}

// Bounds of a batch's answer, so that no request draws an answer far
// larger than itself: a storage-free listing is answered once per batch,
// and the answers of a batch without a key stop growing past
// AmplificationFactor times the request (plus one tool list, which a
// single request may draw too); a keyed one past MaxBatchAnswer.
const (
	AmplificationFactor = 20
	MaxBatchAnswer      = 64 << 20
)

// oncePerBatch are the calls answered from configuration alone, whose
// repeats in one batch could only multiply the answer.
var oncePerBatch = []string{"initialize", "server/discover", "tools/list", "tools/call explain_access_modes"}

func (e *Endpoint) serveBatch(ctx context.Context, msgs []Message, actor *auth.Actor, headerVersion string, requestBytes int, trace *core.Trace) *Answer {
	budget := ops.NewBudget(e.cfg.BatchWait)
	limit := MaxBatchAnswer
	if actor == nil {
		limit = AmplificationFactor*requestBytes + e.listedBytes
	}
	answered := map[string]bool{}
	var parts [][]byte
	size := 0
	for i := range msgs {
		m := &msgs[i]
		var res *response
		switch kind := repeatKind(m); {
		case size > limit && m.IsCall():
			res = errorResponse(m.ID, rpcErr(CodeInvalidRequest, 0, "this batch's answer reached its bound of %d bytes; send the rest in another request", limit))
		case kind != "" && answered[kind]:
			res = errorResponse(m.ID, rpcErr(CodeInvalidRequest, 0, "%s is answered once per batch; its answer is the same every time", kind))
		default:
			if kind != "" {
				answered[kind] = true
			}
			res = e.handle(ctx, &call{msg: m, actor: actor, headerVersion: headerVersion, budget: budget, trace: trace})
		}
		if res == nil {
			continue
		}
		b, err := json.Marshal(res)
		if err != nil {
			b, _ = json.Marshal(errorResponse(m.ID, rpcErr(CodeInternalError, 0, "internal error")))
		}
		parts = append(parts, b)
		size += len(b)
	}
	if len(parts) == 0 {
		return &Answer{Status: http.StatusAccepted}
	}
	body := append([]byte{'['}, bytes.Join(parts, []byte{','})...)
	return &Answer{Status: http.StatusOK, Body: append(body, ']')}
}

// repeatKind names a message among oncePerBatch, or "".
func repeatKind(m *Message) string {
	if !m.IsCall() || m.Bad != nil {
		return ""
	}
	kind := m.Method
	if kind == "tools/call" {
		var p struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(m.Params, &p)
		kind += " " + p.Name
	}
	if slices.Contains(oncePerBatch, kind) {
		return kind
	}
	return ""
}

func single(res *response, status int) *Answer {
	b, err := json.Marshal(res)
	if err != nil {
		b, status = []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal error"}}`), http.StatusInternalServerError
	}
	return &Answer{Status: status, Body: b}
}

func unsupportedVersion(requested string) *Error {
	requested = input.Clip(requested)
	e := rpcErr(CodeUnsupportedVersion, http.StatusBadRequest, "Unsupported protocol version %q; this server speaks %v", requested, Versions)
	e.Data = map[string]any{"supported": Versions, "requested": requested}
	return e
}

// keyedTool returns the operation msg calls if it needs a key.
func keyedTool(msg *Message) *ops.Op {
	if !msg.IsCall() || msg.Bad != nil {
		return nil
	}
	if taskMethodName(msg.Method) || msg.Method == listenMethod {
		return getOp // a task handle is its maker's
	}
	if msg.Method != "tools/call" {
		return nil
	}
	var p struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(msg.Params, &p) != nil {
		return nil
	}
	if o := ops.ByTool(p.Name); o != nil && !o.Keyless() {
		return o
	}
	return nil
}
