package httpapi_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	verrors "github.com/pb33f/libopenapi-validator/errors"

	"github.com/tessera-dev/tessera/internal/httpapi"
)

// Every exchange of the end-to-end tests is held to the published
// contract: each answer of a documented route must be one the OpenAPI
// document describes (status, content type, schema), and each request the
// server accepted must be one the document allows. So the document cannot
// drift from the server unnoticed (SPEC §3.1).

// maxRecorded bounds the bytes of one body kept for validation; a longer
// body is not validated (the size limits have tests of their own).
const maxRecorded = 2 << 20

// exchange is one request and its answer as the handler saw them.
type exchange struct {
	method, target string
	reqHeader      http.Header
	reqBody        []byte
	reqComplete    bool
	status         int
	respHeader     http.Header
	respBody       []byte
	respComplete   bool
}

// contract records the exchanges of one test server.
type contract struct {
	next http.Handler
	// routes holds the server's patterns, to tell routed requests from
	// the rest.
	routes *http.ServeMux
	mu     sync.Mutex
	seen   []exchange
}

func newContract(api *httpapi.Server) *contract {
	c := &contract{next: api, routes: http.NewServeMux()}
	for _, p := range api.Patterns() {
		c.routes.Handle(p, http.NotFoundHandler())
	}
	return c
}

func (c *contract) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	in := &capture{complete: true}
	if r.Body != nil && r.Body != http.NoBody {
		in.r = r.Body
		r.Body = in
	}
	out := &captureWriter{ResponseWriter: w, body: capture{complete: true}}
	c.next.ServeHTTP(out, r)
	// A client that went away got no answer to hold, unless the answer
	// was an event stream: that ends only when its client goes.
	if r.Context().Err() != nil && w.Header().Get("Content-Type") != "text/event-stream" {
		return
	}
	status := out.status
	if status == 0 {
		status = http.StatusOK
	}
	ex := exchange{method: r.Method, target: r.RequestURI, reqHeader: r.Header.Clone(),
		reqBody: in.buf.Bytes(), reqComplete: in.complete && (in.r == nil || in.eof),
		status: status, respHeader: w.Header().Clone(), respBody: out.body.buf.Bytes(), respComplete: out.body.complete}
	c.mu.Lock()
	c.seen = append(c.seen, ex)
	c.mu.Unlock()
}

// capture keeps the first maxRecorded bytes that pass through it.
type capture struct {
	r        io.ReadCloser
	buf      bytes.Buffer
	complete bool
	eof      bool
}

func (c *capture) keep(p []byte) {
	if c.buf.Len()+len(p) > maxRecorded {
		c.complete = false
		return
	}
	c.buf.Write(p)
}

func (c *capture) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.keep(p[:n])
	if err == io.EOF {
		c.eof = true
	}
	return n, err
}

func (c *capture) Close() error { return c.r.Close() }

type captureWriter struct {
	http.ResponseWriter
	status int
	body   capture
}

func (w *captureWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *captureWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.body.keep(p)
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *captureWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// openAPIDoc is the server's API description, asked of the handler itself.
func openAPIDoc(t testing.TB, h http.Handler) []byte {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/openapi.json", nil))
	if rec.Code != 200 {
		t.Fatalf("GET /v1/openapi.json: %d", rec.Code)
	}
	return rec.Body.Bytes()
}

var validators struct {
	mu   sync.Mutex
	byID map[[32]byte]validator.Validator
}

// validatorFor builds (once per distinct document) the validator of doc.
func validatorFor(t testing.TB, doc []byte) validator.Validator {
	t.Helper()
	validators.mu.Lock()
	defer validators.mu.Unlock()
	id := sha256.Sum256(doc)
	if v, ok := validators.byID[id]; ok {
		return v
	}
	d, err := libopenapi.NewDocument(doc)
	if err != nil {
		t.Fatalf("parse the API description: %v", err)
	}
	v, errs := validator.NewValidator(d)
	if len(errs) > 0 {
		t.Fatalf("validator: %v", errs)
	}
	if validators.byID == nil {
		validators.byID = map[[32]byte]validator.Validator{}
	}
	validators.byID[id] = v
	return v
}

// unrouted reports whether a request reached no route: an unknown path,
// a known path under another method, or a non-canonical path. Such paths
// are, by definition, not in the document.
func (c *contract) unrouted(ex exchange, req *http.Request) bool {
	if _, pattern := c.routes.Handler(req); pattern == "" {
		return true
	}
	return ex.status == http.StatusBadRequest && bytes.Contains(ex.respBody, []byte(`"field":"path"`))
}

// check validates every recorded exchange against doc and fails t with
// each distinct disagreement.
func (c *contract) check(t testing.TB, doc []byte) {
	t.Helper()
	for _, p := range c.problems(t, doc) {
		t.Errorf("the API description disagrees with the server: %s", p)
	}
}

// problems are the distinct disagreements of the exchanges so far with doc.
func (c *contract) problems(t testing.TB, doc []byte) []string {
	t.Helper()
	v := validatorFor(t, doc)
	c.mu.Lock()
	seen := slices.Clone(c.seen)
	c.mu.Unlock()
	var problems []string
	for _, ex := range seen {
		req := httptest.NewRequest(ex.method, ex.target, bytes.NewReader(ex.reqBody))
		req.Header = ex.reqHeader.Clone()
		if c.unrouted(ex, req) {
			continue
		}
		if ex.respComplete && ex.method != http.MethodHead {
			res := &http.Response{StatusCode: ex.status, Header: ex.respHeader, Body: io.NopCloser(bytes.NewReader(ex.respBody)), Request: req}
			if ok, errs := v.ValidateHttpResponse(req, res); !ok {
				problems = append(problems, describe("answer", ex, errs))
			}
		}
		if ex.status < 300 && ex.reqComplete {
			req := httptest.NewRequest(ex.method, ex.target, bytes.NewReader(ex.reqBody))
			req.Header = ex.reqHeader.Clone()
			if req.Header.Get("Content-Type") == "" {
				// The server reads a body by its route, whatever it is
				// labeled; OpenAPI can only say that with a media type.
				ctype := "application/json"
				if ex.method == http.MethodPut && strings.Contains(ex.target, "/v1/blobs/uploads/") {
					ctype = "application/octet-stream"
				}
				req.Header.Set("Content-Type", ctype)
			}
			if ok, errs := v.ValidateHttpRequestSync(req); !ok {
				problems = append(problems, describe("accepted request", ex, errs))
			}
		}
	}
	slices.Sort(problems)
	return slices.Compact(problems)
}

func describe(what string, ex exchange, errs []*verrors.ValidationError) string {
	var b strings.Builder
	target, _, _ := strings.Cut(ex.target, "?")
	fmt.Fprintf(&b, "%s %s %s (%d):", what, ex.method, target, ex.status)
	for _, e := range errs {
		fmt.Fprintf(&b, " %s (%s)", e.Message, e.Reason)
		for _, f := range e.SchemaValidationErrors {
			fmt.Fprintf(&b, " [%s at %s]", f.Reason, f.FieldPath)
		}
	}
	return b.String()
}

// The check can fail: a document that drifted from the server in a
// response schema, a request bound or a status is caught by the very
// exchanges the real document passes.
func TestContractCatchesDrift(t *testing.T) {
	s := newTestServer(t)
	s.enqueue("main", adminKey, map[string]any{"title": "a title of some length"})
	s.emptyClaim("main", adminKey, "empty")
	doc := openAPIDoc(t, s.HTTP.Config.Handler)
	if p := s.contract.problems(t, doc); len(p) != 0 {
		t.Fatalf("the real document disagrees: %q", p)
	}
	for _, c := range []struct {
		name   string
		mutate func(doc map[string]any)
		want   string
	}{
		{"a response field the document lacks", func(doc map[string]any) {
			delete(dig(doc, "components", "schemas", "Task", "properties"), "cancel_requested")
		}, "answer POST /v1/tasks (201)"},
		{"a bound looser on the server", func(doc map[string]any) {
			dig(doc, "components", "schemas", "CoreEnqueueParams", "properties", "title")["maxLength"] = 5
		}, "accepted request POST /v1/tasks (201)"},
		{"a status the document lacks", func(doc map[string]any) {
			delete(dig(doc, "paths", "/v1/claims", "post", "responses"), "204")
		}, "answer POST /v1/claims (204)"},
	} {
		var m map[string]any
		if err := json.Unmarshal(doc, &m); err != nil {
			t.Fatal(err)
		}
		c.mutate(m)
		bad, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		p := s.contract.problems(t, bad)
		if !slices.ContainsFunc(p, func(p string) bool { return strings.HasPrefix(p, c.want) }) {
			t.Errorf("%s: not caught; problems %q", c.name, p)
		}
	}
}

// dig walks a decoded JSON document down keys; it fails the test by
// panicking on a path that is not there.
func dig(doc map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		doc = doc[k].(map[string]any)
	}
	return doc
}
