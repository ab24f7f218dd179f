package httpapi

import (
	"net/http"

	"github.com/tessera-dev/tessera/internal/core"

	"github.com/tessera-dev/tessera/internal/discovery"
)

// Describe lists every route the server registers, for the API
// description: the API routes from the route table, then the discovery
// documents.
func (s *Server) Describe() []discovery.Route {
	var out []discovery.Route
	for _, rt := range s.routes() {
		need := core.NeedOf(rt.op)
		auth := string(need.Action)
		switch {
		case !need.Grant && need.Action == "":
			auth = "key"
		case auth == "":
			auth = "namespace grant"
		}
		d := discovery.Route{Method: rt.method, Path: "/v1" + rt.path, Namespaced: true,
			Summary: rt.summary, Auth: auth, In: rt.in, Out: rt.out, Status: http.StatusOK}
		if c, ok := rt.out.(created); ok {
			d.Out, d.Status = c.body, http.StatusCreated
		}
		if rt.out == nil {
			d.Status = http.StatusNoContent
		}
		if _, ok := rt.in.(rawBody); ok {
			d.In, d.RawBody = nil, true
		}
		if _, ok := rt.out.(rawBody); ok {
			d.Out, d.RawResponse = nil, true
		}
		out = append(out, d)
	}
	sr := s.sessionRoute()
	out = append(out, discovery.Route{Method: sr.method, Path: "/v1" + sr.path, Summary: sr.summary, Auth: "public",
		Out: core.Session{}, Status: http.StatusCreated})
	for _, rt := range s.publicRoutes() {
		out = append(out, discovery.Route{Method: rt.method, Path: rt.path, Namespaced: true,
			Summary: rt.summary, Auth: "public", In: rt.in, Out: rt.out, Status: http.StatusOK})
	}
	auth := "admin"
	if s.cfg.MetricsPublic {
		auth = "public"
	}
	out = append(out, discovery.Route{Method: http.MethodPost, Path: "/mcp", Auth: "public", In: mcpMessage{}, Out: mcpMessage{},
		Summary: "MCP endpoint (Streamable HTTP, JSON-RPC 2.0, batches accepted): tools that act need Authorization: Bearer; 202 for notifications"})
	out = append(out, discovery.Route{Method: http.MethodGet, Path: "/metrics", Summary: "Prometheus metrics: storage rows, the allowance, requests by route and status", Auth: auth, RawResponse: true})
	for _, p := range discovery.Paths {
		out = append(out, discovery.Route{Method: http.MethodGet, Path: p, Summary: "Discovery document", Auth: "public"})
	}
	return out
}

// mcpMessage is a JSON-RPC message, for the API description; its shape
// beyond the envelope is MCP's.
type mcpMessage struct {
	JSONRPC string         `json:"jsonrpc"`
	ID      any            `json:"id,omitempty"`
	Method  string         `json:"method,omitempty"`
	Params  map[string]any `json:"params,omitempty"`
	Result  map[string]any `json:"result,omitempty"`
	Error   map[string]any `json:"error,omitempty"`
}

// created marks a route's out prototype as answered with 201 Created.
type created struct{ body any }

// rawBody marks a route whose request body is raw bytes, not JSON.
type rawBody struct{}

func (s *Server) discoveryConfig(cfg Config) discovery.Config {
	c := s.core.Config()
	return discovery.Config{
		PublicURL: cfg.PublicURL, Version: cfg.Version,
		MaxBodyBytes: MaxBodyBytes,
		ClaimRate:    c.ClaimRate, ClaimBurst: c.ClaimBurst, ClaimConcurrency: c.ClaimConcurrency,
		MCP: s.mcp.Docs(),
		Sessions: discovery.Sessions{PerAddressPerHour: c.Sessions.PerAddress, PerHour: c.Sessions.PerHour,
			Requests: c.Sessions.Requests, BodyBytes: core.AnonymousBodyBytes, LifetimeHours: int(core.SessionLifetime.Hours())},
	}
}
