// Package discovery owns the documents newcomers and agents find Tessera by
// (SPEC §3.1): the landing page, the connect guide and its JSON form, the
// OpenAPI description, llms.txt, the A2A agent card, robots.txt and the
// favicon. They depend on configuration alone, so they are rendered once at
// start-up and served from memory: no storage, no key lookup, even when the
// store is down.
package discovery

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Config is everything the documents depend on.
type Config struct {
	// PublicURL is the base URL clients reach the server at, without a
	// trailing slash.
	PublicURL string
	Version   string
	// MaxBodyBytes and friends are the limits worth telling a client.
	MaxBodyBytes     int
	MaxBlobBytes     int
	ClaimRate        float64
	ClaimBurst       int
	ClaimConcurrency int
	// Limits are the bounds of a worker's calls, from the operations'
	// declarations.
	Limits Limits
	// MCP describes the MCP endpoint.
	MCP MCP
	// Sessions are the anonymous demo sessions' limits.
	Sessions Sessions
}

// Limits are the bounds a worker's loop runs within.
type Limits struct {
	ClaimWaitMax                     int64
	LeaseMin, LeaseDefault, LeaseMax int64
}

// Sessions are what a newcomer is told of anonymous demo sessions.
type Sessions struct {
	PerAddressPerHour int
	PerHour           int
	Requests          int
	BodyBytes         int
	LifetimeHours     int
}

// Doc is one rendered document.
type Doc struct {
	ContentType string
	Body        []byte
	ETag        string
}

// Docs are the rendered documents by path.
type Docs struct {
	byPath map[string]*Doc
	// landingJSON answers / for Accept: application/json.
	landingJSON *Doc
}

// Paths lists the discovery routes in a stable order.
var Paths = []string{"/", "/connect", "/connect.json", "/v1/openapi.json", "/llms.txt", "/llms-full.txt",
	"/robots.txt", "/favicon.svg", "/.well-known/agent-card.json"}

// New renders every document. routes describe the HTTP API; errorBody is a
// zero value of the API's error body.
func New(cfg Config, routes []Route, errorBody any) (*Docs, error) {
	cfg.PublicURL = strings.TrimRight(cfg.PublicURL, "/")
	openapi, err := OpenAPI(cfg, routes, errorBody)
	if err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	connect := connectJSON(cfg)
	card := agentCard(cfg)
	d := &Docs{byPath: map[string]*Doc{}}
	add := func(path, ctype string, body []byte) {
		d.byPath[path] = newDoc(ctype, body)
	}
	add("/", "text/html; charset=utf-8", landingHTML(cfg))
	add("/connect", "text/html; charset=utf-8", connectHTML(cfg))
	add("/connect.json", "application/json; charset=utf-8", mustJSON(connect))
	add("/v1/openapi.json", "application/json; charset=utf-8", openapi)
	add("/llms.txt", "text/plain; charset=utf-8", llmsTxt(cfg, routes, false))
	add("/llms-full.txt", "text/plain; charset=utf-8", llmsTxt(cfg, routes, true))
	add("/robots.txt", "text/plain; charset=utf-8", []byte(robots))
	add("/favicon.svg", "image/svg+xml", []byte(favicon))
	add("/.well-known/agent-card.json", "application/json; charset=utf-8", mustJSON(card))
	d.landingJSON = newDoc("application/json; charset=utf-8", mustJSON(landingSummary(cfg)))
	return d, nil
}

func newDoc(ctype string, body []byte) *Doc {
	sum := sha256.Sum256(body)
	return &Doc{ContentType: ctype, Body: body, ETag: `"` + hex.EncodeToString(sum[:16]) + `"`}
}

func mustJSON(v any) []byte {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic(err) // only static maps are marshaled here
	}
	return append(b, '\n')
}

// Get returns the document at path (nil if none), choosing the landing
// page's JSON form for a client that accepts JSON but not HTML.
func (d *Docs) Get(path, accept string) *Doc {
	if path == "/" && wantsJSON(accept) {
		return d.landingJSON
	}
	return d.byPath[path]
}

func wantsJSON(accept string) bool {
	return strings.Contains(accept, "application/json") && !strings.Contains(accept, "text/html")
}

// Handler serves the document at the request path.
func (d *Docs) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		doc := d.Get(r.URL.Path, r.Header.Get("Accept"))
		if doc == nil {
			http.NotFound(w, r)
			return
		}
		Serve(w, r, doc)
	})
}

// Serve writes doc with its validators: ETag, Cache-Control, and 304 for a
// matching If-None-Match.
func Serve(w http.ResponseWriter, r *http.Request, doc *Doc) {
	h := w.Header()
	h.Set("ETag", doc.ETag)
	h.Set("Cache-Control", "public, max-age=300")
	h.Set("Vary", "Accept")
	if match := r.Header.Get("If-None-Match"); match != "" && etagMatch(match, doc.ETag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", doc.ContentType)
	h.Set("Content-Length", fmt.Sprint(len(doc.Body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = bytes.NewReader(doc.Body).WriteTo(w)
	}
}

func etagMatch(header, etag string) bool {
	for _, part := range strings.Split(header, ",") {
		part = strings.TrimSpace(part)
		if part == "*" || strings.TrimPrefix(part, "W/") == etag {
			return true
		}
	}
	return false
}
