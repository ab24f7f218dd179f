package httpapi

import (
	"net/http"
	"reflect"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/discovery"
	"github.com/tessera-dev/tessera/internal/ops"
)

// Describe lists every route the server registers, for the API
// description: the operations' routes from the table they are registered
// from, then the MCP endpoint, the metrics and the discovery documents.
func (s *Server) Describe() []discovery.Route {
	var out []discovery.Route
	for _, o := range ops.Routes() {
		d := discovery.Route{Method: o.HTTP.Method, Path: o.HTTP.Path, Namespaced: o.HTTP.Namespaced,
			Summary: o.Summary, Description: o.Description, Auth: o.Auth(), In: o.In, Out: o.Out,
			Status: o.HTTP.Status, NoContent: o.HTTP.NoContent, Also: o.HTTP.Also, RawBody: o.HTTP.RawBody, HTML: o.HTTP.HTML}
		if o.HTTP.RawResponse {
			// Blob bytes: any media type, Range and If-None-Match.
			d.Out, d.RawResponse, d.RawType, d.Ranges = nil, true, "*/*", true
		}
		if o.HTTP.Stream {
			d.Out, d.RawResponse, d.RawType = nil, true, "text/event-stream"
		}
		out = append(out, d)
	}
	auth := "admin"
	if s.cfg.MetricsPublic {
		auth = "public"
	}
	out = append(out, discovery.Route{Method: http.MethodPost, Path: "/mcp", Auth: "public", In: reflect.TypeFor[mcpMessage](), Out: reflect.TypeFor[mcpMessage](), JSONRPC: true,
		Summary: "MCP endpoint (Streamable HTTP, JSON-RPC 2.0, batches accepted): tools that act need Authorization: Bearer; 202 for notifications"})
	out = append(out, discovery.Route{Method: http.MethodGet, Path: "/metrics", Summary: "Prometheus metrics: storage rows, the allowance, operations by outcome, requests by route and status", Auth: auth, RawResponse: true, RawType: "text/plain"})
	for _, p := range discovery.Paths {
		out = append(out, discovery.Route{Method: http.MethodGet, Path: p, Summary: "Discovery document", Auth: "public"})
	}
	return append(out, consoleRoutes()...)
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

func (s *Server) discoveryConfig(cfg Config) discovery.Config {
	c := s.core.Config()
	claim := ops.Named(core.ActClaim).Input()
	lease, wait := claim.Field("lease_seconds").Bound, claim.Field("wait_seconds").Bound
	return discovery.Config{
		Limits: discovery.Limits{ClaimWaitMax: wait.Max(),
			LeaseMin: lease.Min(), LeaseMax: lease.Max(), LeaseDefault: int64(lease.DefaultValue().(int))},
		PublicURL: cfg.PublicURL, Version: cfg.Version,
		MaxBodyBytes: MaxBodyBytes, MaxBlobBytes: int(s.core.MaxBlobBytes()),
		ClaimRate: c.ClaimRate, ClaimBurst: c.ClaimBurst, ClaimConcurrency: c.ClaimConcurrency,
		MCP: s.mcp.Docs(),
		Sessions: discovery.Sessions{PerAddressPerHour: c.Sessions.PerAddress, PerHour: c.Sessions.PerHour,
			Requests: c.Sessions.Requests, BodyBytes: core.AnonymousBodyBytes, LifetimeHours: int(core.SessionLifetime.Hours())},
	}
}
