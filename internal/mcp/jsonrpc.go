package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"unicode/utf8"

	"github.com/tessera-dev/tessera/internal/input"
)

// JSON-RPC 2.0 error codes, and the ones MCP 2026-07-28 reserves.
const (
	CodeParseError         = -32700
	CodeInvalidRequest     = -32600
	CodeMethodNotFound     = -32601
	CodeInvalidParams      = -32602
	CodeInternalError      = -32603
	CodeHeaderMismatch     = -32020
	CodeUnsupportedVersion = -32022
)

// MaxBatch bounds the messages of one batch. The byte limit bounds the
// request; this bounds the answer, which a batch of small calls with large
// results (tools/list) would otherwise multiply.
const MaxBatch = 100

// maxIDLen bounds a string request id: it is echoed in the answer.
const maxIDLen = 256

var integerID = regexp.MustCompile(`^-?(0|[1-9][0-9]{0,18})$`)

// Message is one decoded JSON-RPC message of a request body.
type Message struct {
	// ID is the request id exactly as sent (a JSON string or integer), nil
	// for a notification.
	ID     json.RawMessage
	Method string
	Params json.RawMessage
	// Response marks a response the client sent (result or error): it is
	// accepted and never answered.
	Response bool
	// Bad, when set, is why the message is not a valid request; it is
	// answered with this error.
	Bad *Error
}

// IsCall reports whether the message expects an answer.
func (m *Message) IsCall() bool { return m.Bad != nil || (!m.Response && m.ID != nil) }

// Error is a JSON-RPC error object.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
	// status is the HTTP status the error answers with when it is the
	// body's only message (0: 200); a batch always answers 200.
	status int
}

func rpcErr(code, status int, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), status: status}
}

// response is one JSON-RPC response.
type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

var nullID = json.RawMessage("null")

func errorResponse(id json.RawMessage, e *Error) *response {
	if id == nil {
		id = nullID
	}
	return &response{JSONRPC: "2.0", ID: id, Error: e}
}

// DecodeBody splits a POST /mcp body into its messages: one, or a batch
// (an array). A body that is not JSON at all, or an empty or oversized
// batch, fails as a whole; a batch element that is not a valid request
// becomes a message with Bad set, answered in its place.
func DecodeBody(body []byte) (msgs []Message, batch bool, err *Error) {
	if !utf8.Valid(body) {
		return nil, false, rpcErr(CodeParseError, http.StatusBadRequest, "the body is not valid UTF-8")
	}
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 {
		return nil, false, rpcErr(CodeParseError, http.StatusBadRequest, "the body is empty; send a JSON-RPC message")
	}
	if trimmed[0] != '[' {
		var raw json.RawMessage
		if json.Unmarshal(body, &raw) != nil {
			return nil, false, rpcErr(CodeParseError, http.StatusBadRequest, "the body is not valid JSON")
		}
		return []Message{decodeMessage(raw)}, false, nil
	}
	var raws []json.RawMessage
	if json.Unmarshal(body, &raws) != nil {
		return nil, true, rpcErr(CodeParseError, http.StatusBadRequest, "the body is not valid JSON")
	}
	switch {
	case len(raws) == 0:
		return nil, true, rpcErr(CodeInvalidRequest, http.StatusBadRequest, "the batch is empty")
	case len(raws) > MaxBatch:
		return nil, true, rpcErr(CodeInvalidRequest, http.StatusBadRequest, "a batch holds at most %d messages, not %d", MaxBatch, len(raws))
	}
	msgs = make([]Message, len(raws))
	for i, raw := range raws {
		msgs[i] = decodeMessage(raw)
	}
	return msgs, true, nil
}

// decodeMessage checks one message against JSON-RPC 2.0 as MCP narrows it:
// ids are strings or integers (never null), params an object.
func decodeMessage(raw json.RawMessage) Message {
	if len(raw) == 0 || raw[0] != '{' {
		return Message{Bad: rpcErr(CodeInvalidRequest, http.StatusBadRequest, "a JSON-RPC message is an object")}
	}
	// A member given twice would be read as its last copy by some readers
	// and its first by others: refused, as in every request body.
	fields := map[string]json.RawMessage{}
	if err := input.Members(raw, func(name string, v json.RawMessage) error {
		fields[name] = v
		return nil
	}); err != nil {
		return Message{Bad: rpcErr(CodeInvalidRequest, http.StatusBadRequest, "a JSON-RPC message is an object whose members are given once: %v", err)}
	}
	var m Message
	if id, ok := fields["id"]; ok {
		if !validID(id) {
			return Message{Bad: rpcErr(CodeInvalidRequest, http.StatusBadRequest, "id must be a string (at most %d bytes) or an integer", maxIDLen)}
		}
		m.ID = id
	}
	for name := range fields {
		switch name {
		case "jsonrpc", "id", "method", "params", "result", "error":
		default:
			return bad(m, "unknown member %q", input.Clip(name))
		}
	}
	if v := fields["jsonrpc"]; string(v) != `"2.0"` {
		return bad(m, `jsonrpc must be "2.0"`)
	}
	_, isResult := fields["result"]
	_, isError := fields["error"]
	method, hasMethod := fields["method"]
	if isResult || isError {
		if hasMethod || m.ID == nil || isResult == isError {
			return bad(m, "a response has an id and exactly one of result and error, and no method")
		}
		m.Response = true
		return m
	}
	if !hasMethod || json.Unmarshal(method, &m.Method) != nil || m.Method == "" {
		return bad(m, "method must be a non-empty string")
	}
	if params, ok := fields["params"]; ok && string(params) != "null" {
		if params[0] != '{' {
			m.Bad = rpcErr(CodeInvalidParams, http.StatusBadRequest, "params must be an object")
			return m
		}
		m.Params = params
	}
	return m
}

func bad(m Message, format string, args ...any) Message {
	m.Bad = rpcErr(CodeInvalidRequest, http.StatusBadRequest, format, args...)
	return m
}

// validID accepts a JSON string of at most maxIDLen bytes or an integer
// that fits int64.
func validID(id json.RawMessage) bool {
	if len(id) > 0 && id[0] == '"' {
		var s string
		return json.Unmarshal(id, &s) == nil && len(s) <= maxIDLen
	}
	return integerID.Match(id)
}
