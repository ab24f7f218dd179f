package httpapi

import (
	"fmt"
	"net/http"
	"reflect"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/discovery"
	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/tessera"
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
			Summary: rt.summary, Auth: auth, In: rt.in, Out: rt.out, Status: http.StatusOK, NoContent: rt.noContent, Also: rt.also}
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
			// Blob bytes: any media type, Range and If-None-Match.
			d.Out, d.RawResponse, d.RawType, d.Ranges = nil, true, "*/*", true
		}
		out = append(out, d)
	}
	sr := s.sessionRoute()
	out = append(out, discovery.Route{Method: sr.method, Path: "/v1" + sr.path, Summary: sr.summary, Auth: "public",
		Out: core.Session{}, Status: http.StatusCreated})
	for _, rt := range s.publicRoutes() {
		out = append(out, discovery.Route{Method: rt.method, Path: rt.path, Namespaced: true,
			Summary: rt.summary, Auth: "public", In: rt.in, Out: rt.out, Status: http.StatusOK, HTML: rt.html})
	}
	auth := "admin"
	if s.cfg.MetricsPublic {
		auth = "public"
	}
	out = append(out, discovery.Route{Method: http.MethodPost, Path: "/mcp", Auth: "public", In: mcpMessage{}, Out: mcpMessage{}, JSONRPC: true,
		Summary: "MCP endpoint (Streamable HTTP, JSON-RPC 2.0, batches accepted): tools that act need Authorization: Bearer; 202 for notifications"})
	out = append(out, discovery.Route{Method: http.MethodGet, Path: "/metrics", Summary: "Prometheus metrics: storage rows, the allowance, requests by route and status", Auth: auth, RawResponse: true, RawType: "text/plain"})
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
		Rules: s.schemaRules(),
	}
}

// The patterns the core's checks hold names to, for the API description
// (describe_test.go holds each to the check it mirrors).
const (
	namePattern      = `^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$`
	keyPattern       = `^[A-Za-z0-9_][A-Za-z0-9_.:=@-]{0,255}$`
	prefixPattern    = `^[A-Za-z0-9_.:=@-]{0,256}$`
	namespacePattern = `^[a-z0-9][a-z0-9-]{0,62}$`
	sumPattern       = `^([Ss][Hh][Aa]256:)?[0-9A-Fa-f]{64}$`
	idPattern        = `^[0-9A-Za-z]{1,64}$`
	scopePattern     = `^(admin|read|enqueue|claim|write|namespace:(\*|[a-z0-9][a-z0-9-]{0,62}))$`
	// oneLine is text without control characters (C0, DEL, C1).
	oneLine = `^[^\x00-\x1f\x7f-\x9f]*$`
)

// schemaRules are the bounds the server enforces, as JSON Schema keywords
// for the API description. Lengths count bytes on the server and
// characters in JSON Schema, so a maxLength here is the byte bound: never
// looser than the server, exact for ASCII.
func (s *Server) schemaRules() discovery.Rules {
	type kw = map[string]any
	between := func(lo, hi int64) kw { return kw{"minimum": lo, "maximum": hi} }
	name := kw{"maxLength": 64, "pattern": namePattern}
	text := func(max int) kw { return kw{"maxLength": max} }
	lease := kw{"anyOf": []any{kw{"const": 0}, between(core.MinLeaseSeconds, core.MaxLeaseSeconds)},
		"description": "seconds; 0 or absent for the default"}
	principal := map[string]kw{
		"kind":         {"enum": []string{tessera.KindUser, tessera.KindAgent, tessera.KindService}},
		"account":      {"maxLength": core.MaxAccountLen, "pattern": oneLine},
		"display_name": {"maxLength": core.MaxDisplayNameLen, "pattern": oneLine},
	}
	rawPolicy := kw{"enum": []string{tessera.RawPrivate, tessera.RawNamespace}}
	// The core reads an empty queue as the default one, as it reads an
	// absent one.
	queue := kw{"anyOf": []any{kw{"const": ""}, name}, "description": "empty or absent for default"}
	return discovery.Rules{
		Fields: map[reflect.Type]map[string]kw{
			reflect.TypeFor[core.EnqueueParams](): {
				"queue":        queue,
				"title":        {"minLength": 1, "maxLength": core.MaxTitleLen, "pattern": oneLine},
				"brief":        text(core.MaxBriefLen),
				"labels":       {"maxItems": core.MaxLabels, "items": kw{"type": "string", "pattern": namePattern}},
				"priority":     between(-core.MaxPriority, core.MaxPriority),
				"max_attempts": between(1, core.MaxMaxAttempts),
				"payload":      {"description": fmt.Sprintf("any JSON value, at most %d bytes", core.MaxPayloadLen)},
			},
			reflect.TypeFor[core.ClaimParams](): {
				"queue":         queue,
				"lease_seconds": lease,
				"wait_seconds":  between(0, core.MaxClaimWait),
			},
			reflect.TypeFor[core.HeartbeatParams](): {
				"lease_seconds": lease,
				"progress":      {"description": fmt.Sprintf("any JSON value, at most %d bytes", core.MaxProgressLen)},
			},
			reflect.TypeFor[core.SubmitParams](): {
				"outcome": {"enum": []string{"succeeded", "failed"}},
				"error":   text(core.MaxErrorLen),
				"result":  {"description": fmt.Sprintf("any JSON value, at most %d bytes", core.MaxResultLen)},
			},
			reflect.TypeFor[noteParams]():           {"body": {"minLength": 1, "maxLength": core.MaxNoteLen}},
			reflect.TypeFor[core.PrincipalParams](): principal,
			reflect.TypeFor[core.PrincipalPatch]():  principal,
			reflect.TypeFor[core.KeyParams](): {
				"scopes": {"minItems": 1, "maxItems": core.MaxScopes, "items": kw{"type": "string", "pattern": scopePattern}},
			},
			reflect.TypeFor[core.PutRecordParams](): {
				"value":      {"description": fmt.Sprintf("any JSON value, at most %d bytes compacted", core.MaxValueLen)},
				"if_version": {"minimum": 0},
			},
			reflect.TypeFor[core.DeclareBlobParams](): {
				"sha256":       {"pattern": sumPattern},
				"size":         between(0, s.core.MaxBlobBytes()),
				"content_type": text(core.MaxContentTypeLen),
				"raw_policy":   {"enum": []string{"", tessera.RawPrivate, tessera.RawNamespace}, "description": "empty or absent to keep the namespace's"},
			},
			reflect.TypeFor[core.NamespaceSettingsParams](): {"raw_policy": rawPolicy},
			reflect.TypeFor[meter.Allowance](): {
				"rows_written_per_day": {"minimum": 0},
				"rows_read_per_day":    {"minimum": 0},
			},
			reflect.TypeFor[eventsQuery](): {"since": {"minimum": 0}, "wait": between(0, core.MaxEventsWait)},
		},
		Params: map[string]kw{
			"namespace": {"pattern": namespacePattern},
			"ns":        {"pattern": namespacePattern},
			"bucket":    name,
			"key":       {"pattern": keyPattern},
			"prefix":    {"pattern": prefixPattern},
			"sha256":    {"pattern": sumPattern},
			"id":        {"pattern": idPattern},
			"task":      {"pattern": idPattern},
			"upload_id": {"pattern": idPattern},
			"limit":     between(1, core.MaxListLimit),
			"cursor":    {"maxLength": 256},
			"version":   {"minimum": 1},
			"state":     {"enum": tessera.States},
			"queue":     name,
			"label":     name,
		},
	}
}
