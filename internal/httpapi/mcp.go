package httpapi

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/input"
	"github.com/tessera-dev/tessera/internal/mcp"
	"github.com/tessera-dev/tessera/internal/ops"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// mountMCP serves the MCP endpoint (SPEC §11) behind this adapter's edge:
// the byte limit of ServeHTTP, the Origin check, and the key parse of every
// route. Its tools run through the same operations as the routes.
func (s *Server) mountMCP() {
	s.mcp = mcp.New(s.exec, mcp.Config{PublicURL: strings.TrimRight(s.cfg.PublicURL, "/"), Version: s.cfg.Version, BatchWait: s.cfg.MCPBatchWait})
	s.handle("POST /mcp", http.HandlerFunc(s.serveMCP))
	// The stateless transport has no GET stream and no session to DELETE.
	s.mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, tessera.Errorf(tessera.CodeMethodNotAllowed,
			"the MCP endpoint answers POST only: this server is stateless, with no SSE stream and no session"))
	})
}

func (s *Server) serveMCP(w http.ResponseWriter, r *http.Request) {
	if rec, ok := w.(*statusRecorder); ok {
		rec.route = "POST /mcp"
	}
	if !s.originAllowed(r.Header.Get("Origin")) {
		writeError(w, tessera.Errorf(tessera.CodeForbidden, "Origin %q is neither this server's public origin nor a loopback origin", input.Clip(r.Header.Get("Origin"))))
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, tessera.Errorf(tessera.CodePayloadTooLarge, "the request body is over %d bytes", mbe.Limit))
			return
		}
		writeError(w, tessera.Errorf(tessera.CodeInvalidRequest, "could not read the request body"))
		return
	}
	answer, op, err := s.mcp.Serve(r.Context(), mcp.Request{Header: r.Header, Body: body,
		Authenticate: func() (*auth.Actor, error) {
			a, err := s.authenticate(r)
			// A session key's batch is held to its smaller limit too.
			if err == nil && int64(len(body)) > core.BodyLimit(a, MaxBodyBytes) {
				return nil, tessera.Errorf(tessera.CodePayloadTooLarge, "a demo session's request body is at most %d bytes", core.BodyLimit(a, MaxBodyBytes))
			}
			return a, err
		}})
	if err != nil {
		e := ops.Fault(err)
		writeError(w, e)
		s.core.Count("", tessera.MainNamespace, op, string(e.Code))
		return
	}
	// Answers carry lease tokens and keys: nothing may keep them.
	w.Header().Set("Cache-Control", "no-store")
	if answer.Stream != nil {
		s.streamMCP(w, r, answer)
		return
	}
	if answer.Body == nil {
		w.WriteHeader(answer.Status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(answer.Status)
	_, _ = w.Write(answer.Body)
}

// originAllowed is the DNS-rebinding guard of the MCP transport: an Origin,
// when sent, is this server's public origin or a loopback one.
func (s *Server) originAllowed(origin string) bool {
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return false
	}
	if pub, err := url.Parse(s.cfg.PublicURL); err == nil && strings.EqualFold(u.Scheme+"://"+u.Host, pub.Scheme+"://"+pub.Host) {
		return true
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// streamMCP writes a subscription's messages as Server-Sent Events, as the
// Streamable HTTP transport answers a request with a stream.
func (s *Server) streamMCP(w http.ResponseWriter, r *http.Request, answer *mcp.Answer) {
	sink := newSSESink(w)
	defer sink.done()
	err := answer.Stream(r.Context(), mcpStream{sink})
	if err == nil || r.Context().Err() != nil {
		return
	}
	// The request's error answer: its response, or the stream's last
	// message once the stream is open (a key revoked meanwhile).
	refused := answer.Refused(err)
	if sink.opened {
		_ = mcpStream{sink}.Message(json.RawMessage(refused.Body))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(refused.Status)
	_, _ = w.Write(refused.Body)
}

// mcpStream is a subscription's side of an event stream: each JSON-RPC
// message an SSE "message" event, sent at once.
type mcpStream struct{ *sseSink }

func (m mcpStream) Message(v any) error {
	if err := m.message("", "message", v); err != nil {
		return err
	}
	return m.Flush()
}
