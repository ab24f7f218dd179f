package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/httpapi"
	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// brokenStore refuses every call, as an unreachable database would.
type brokenStore struct{ calls int }

var errBroken = errors.New("storage unreachable")

func (b *brokenStore) Update(context.Context, func(store.Tx) error) error {
	b.calls++
	return errBroken
}
func (b *brokenStore) View(context.Context, func(store.Tx) error) error { b.calls++; return errBroken }
func (b *brokenStore) Close() error                                     { return nil }
func (b *brokenStore) Listen(func(string))                              {}

func newBrokenServer(t *testing.T) (*httptest.Server, *brokenStore, *httpapi.Server) {
	t.Helper()
	bs := &brokenStore{}
	clock := tessera.NewManualClock(time.Now())
	svc := core.New(bs, auth.NewAuthenticator(bs, clock, 5*time.Second), meter.New(clock), clock, core.DefaultConfig())
	api, err := httpapi.New(svc, slog.New(slog.NewTextHandler(io.Discard, nil)), httpapi.Config{PublicURL: "https://tessera.example", Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(api)
	t.Cleanup(hs.Close)
	return hs, bs, api
}

// Discovery documents depend on configuration alone: they answer while the
// store refuses every call, and never call it.
func TestDiscoveryAnswersWithoutStorage(t *testing.T) {
	hs, bs, _ := newBrokenServer(t)
	want := map[string]string{
		"/":                            "text/html",
		"/connect":                     "text/html",
		"/connect.json":                "application/json",
		"/v1/openapi.json":             "application/json",
		"/llms.txt":                    "text/plain",
		"/llms-full.txt":               "text/plain",
		"/robots.txt":                  "text/plain",
		"/favicon.svg":                 "image/svg+xml",
		"/.well-known/agent-card.json": "application/json",
	}
	for path, ctype := range want {
		res, err := http.Get(hs.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), ctype) {
			t.Errorf("%s: %d %q", path, res.StatusCode, res.Header.Get("Content-Type"))
		}
		if res.Header.Get("ETag") == "" || res.Header.Get("Cache-Control") == "" || len(body) == 0 {
			t.Errorf("%s: missing ETag, Cache-Control or body", path)
		}
		if strings.HasSuffix(path, ".json") && !json.Valid(body) {
			t.Errorf("%s: invalid JSON", path)
		}
	}
	if bs.calls != 0 {
		t.Fatalf("discovery touched the store %d times", bs.calls)
	}
	// A keyed API route on the same server does need the store, and says so
	// with the generic error rather than hanging or panicking.
	req, _ := http.NewRequest("GET", hs.URL+"/v1/tasks", nil)
	req.Header.Set("Authorization", "Bearer "+adminKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 500 || bs.calls == 0 {
		t.Fatalf("keyed route on a broken store: %d after %d calls", res.StatusCode, bs.calls)
	}
}

func TestDiscoveryETagAndLandingJSON(t *testing.T) {
	hs, _, _ := newBrokenServer(t)
	res, err := http.Get(hs.URL + "/llms.txt")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	req, _ := http.NewRequest("GET", hs.URL+"/llms.txt", nil)
	req.Header.Set("If-None-Match", res.Header.Get("ETag"))
	res2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res2.Body.Close()
	if res2.StatusCode != http.StatusNotModified {
		t.Fatalf("If-None-Match: %d, want 304", res2.StatusCode)
	}

	req, _ = http.NewRequest("GET", hs.URL+"/", nil)
	req.Header.Set("Accept", "application/json")
	res3, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var summary map[string]any
	if err := json.NewDecoder(res3.Body).Decode(&summary); err != nil {
		t.Fatalf("landing JSON: %v", err)
	}
	res3.Body.Close()
	if summary["api_base"] != "https://tessera.example/v1" {
		t.Fatalf("landing JSON: %v", summary)
	}
}

func fetchOpenAPI(t *testing.T, url string) []byte {
	t.Helper()
	res, err := http.Get(url + "/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The OpenAPI document is valid OpenAPI 3.1 under a standard validator.
func TestOpenAPIValidates(t *testing.T) {
	hs, _, _ := newBrokenServer(t)
	v := validatorFor(t, fetchOpenAPI(t, hs.URL))
	if ok, verrs := v.ValidateDocument(); !ok {
		for _, e := range verrs {
			t.Errorf("%s: %s", e.Message, e.Reason)
		}
	}
}

// Every pattern the server registers appears in the OpenAPI document, so a
// new route cannot be forgotten.
func TestOpenAPICoversEveryRoute(t *testing.T) {
	hs, _, api := newBrokenServer(t)
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(fetchOpenAPI(t, hs.URL), &doc); err != nil {
		t.Fatal(err)
	}
	if len(api.Patterns()) < 40 {
		t.Fatalf("only %d patterns registered", len(api.Patterns()))
	}
	for _, p := range api.Patterns() {
		method, path, _ := strings.Cut(p, " ")
		if path == "/{$}" {
			path = "/"
		}
		if _, ok := doc.Paths[path][strings.ToLower(method)]; !ok {
			t.Errorf("%s is served but missing from the OpenAPI document", p)
		}
	}
}

// GET /metrics speaks the Prometheus text format to an admin key, and
// refuses anyone else.
func TestMetrics(t *testing.T) {
	s := newTestServer(t)
	key, _ := s.newKey("agent", "namespace:main", "read", "enqueue")
	s.enqueue("main", key, map[string]any{})
	wantError(t, s.do("GET", "/metrics", key, nil), 403, "forbidden", "")
	wantError(t, s.do("GET", "/metrics", "", nil), 401, "unauthorized", "")
	r := s.must(200, "GET", "/metrics", adminKey, nil)
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Errorf("content type %q", r.Header.Get("Content-Type"))
	}
	body := string(r.Body)
	for _, want := range []string{
		"# TYPE tessera_storage_rows_written_total counter",
		`tessera_http_requests_total{route="POST /v1/tasks",status="201"} 1`,
		`tessera_http_requests_total{route="GET /metrics",status="403"} 1`,
		"tessera_storage_rows_written_today ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
}

// The document declares what the server answers and enforces: the 204 of
// an empty claim, every path parameter (the blob hash too), the task
// list's filters, and the bounds of request fields.
func TestOpenAPIDeclaresWhatTheServerEnforces(t *testing.T) {
	hs, _, _ := newBrokenServer(t)
	var doc map[string]any
	if err := json.Unmarshal(fetchOpenAPI(t, hs.URL), &doc); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/v1/claims", "/ns/{namespace}/v1/claims"} {
		if _, ok := dig(doc, "paths", p, "post", "responses")["204"]; !ok {
			t.Errorf("POST %s declares no 204", p)
		}
	}
	params := func(path, method string) map[string]map[string]any {
		out := map[string]map[string]any{}
		list, _ := dig(doc, "paths", path, method)["parameters"].([]any)
		for _, p := range list {
			p := p.(map[string]any)
			out[p["in"].(string)+":"+p["name"].(string)] = p["schema"].(map[string]any)
		}
		return out
	}
	for _, path := range []string{"/v1/blobs/{sha256}", "/v1/blobs/{sha256}/meta", "/ns/{namespace}/v1/blobs/{sha256}"} {
		if s := params(path, "get")["path:sha256"]; s == nil || s["pattern"] == nil {
			t.Errorf("GET %s: sha256 parameter %v", path, s)
		}
	}
	tasks := params("/v1/tasks", "get")
	if s := tasks["query:state"]; s == nil || len(s["enum"].([]any)) != len(tessera.States) {
		t.Errorf("GET /v1/tasks state: %v", s)
	}
	if s := tasks["query:limit"]; s == nil || s["minimum"] != float64(1) || s["maximum"] != float64(core.MaxListLimit) {
		t.Errorf("GET /v1/tasks limit: %v", s)
	}
	for _, q := range []string{"query:queue", "query:label", "query:cursor"} {
		if tasks[q] == nil {
			t.Errorf("GET /v1/tasks declares no %s", q)
		}
	}
	enqueue := dig(doc, "components", "schemas", "CoreEnqueueParams")
	if enqueue["additionalProperties"] != false {
		t.Errorf("enqueue body: additionalProperties %v", enqueue["additionalProperties"])
	}
	title := dig(enqueue, "properties", "title")
	if title["maxLength"] != float64(core.MaxTitleLen) || title["pattern"] == nil {
		t.Errorf("enqueue title: %v", title)
	}
	if e := dig(doc, "components", "schemas", "CoreSubmitParams", "properties", "outcome")["enum"]; len(e.([]any)) != 2 {
		t.Errorf("submit outcome: %v", e)
	}
}

// connect.json's limits are the server's: the body and blob limits as
// configured, the claim bounds as the claim operation declares them.
func TestConnectLimitsAreTheServers(t *testing.T) {
	s := newTestServer(t, func(c *core.Config) { c.MaxBlobBytes = 7 << 20 })
	var connect struct {
		Limits struct {
			RequestBodyBytes int `json:"request_body_bytes"`
			BlobUploadBytes  int `json:"blob_upload_bytes"`
			ClaimWaitMax     int `json:"claim_wait_seconds_max"`
			LeaseSeconds     struct {
				Min, Default, Max int
			} `json:"lease_seconds"`
		} `json:"limits"`
	}
	s.must(200, "GET", "/connect.json", "", nil).decode(t, &connect)
	l := connect.Limits
	if l.RequestBodyBytes != httpapi.MaxBodyBytes || l.BlobUploadBytes != 7<<20 || l.ClaimWaitMax != core.MaxClaimWait ||
		l.LeaseSeconds.Min != core.MinLeaseSeconds || l.LeaseSeconds.Default != core.DefaultLeaseSeconds || l.LeaseSeconds.Max != core.MaxLeaseSeconds {
		t.Fatalf("connect.json limits: %+v", l)
	}
}
