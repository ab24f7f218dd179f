package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/app"
	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/httpapi"
	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/store/postgres/pgtest"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// adminKey is the key every test server is seeded with.
const adminKey = "tsk_testadmin_abcdefghijklmnopqrstuvwxyz012345"

// testServer is a real Tessera HTTP server on a real SQLite file, with a
// manual clock for lease and backoff time, assembled by the same code as
// `tessera serve` (internal/app).
type testServer struct {
	t     testing.TB
	URL   string
	Clock *tessera.ManualClock
	Meter *meter.Meter
	DB    store.Store
	Core  *core.Service
	HTTP  *httptest.Server
	// Dir is the data directory: the SQLite file and the blob bytes.
	Dir string
	// contract records the exchanges held to the API description.
	contract *contract
}

// dataFile is the path of the server's SQLite file.
func (s *testServer) dataFile() string { return filepath.Join(s.Dir, "tessera.db") }

func newTestServer(t testing.TB, configure ...func(*core.Config)) *testServer {
	t.Helper()
	s, _ := serverAt(t, t.TempDir(), tessera.NewManualClock(time.Now()), configure...)
	return s
}

// serverAt starts a test server on a data directory of the test's choosing,
// so a test can stop it (the returned func) and start another on the same
// files.
func serverAt(t testing.TB, dir string, clock *tessera.ManualClock, configure ...func(*core.Config)) (*testServer, func()) {
	t.Helper()
	return serverWith(t, dir, clock, func(o *app.Options) {
		for _, f := range configure {
			f(&o.Core)
		}
	})
}

// onPostgres runs the suite on PostgreSQL (TESSERA_TEST_STORE=postgres, as
// `make test` does in a second pass) instead of a SQLite file.
var onPostgres = os.Getenv("TESSERA_TEST_STORE") == "postgres"

// pgSchemas gives each data directory its own PostgreSQL schema, so a
// server started again on a directory finds its store again.
var pgSchemas sync.Map

// sqliteOnly marks a test of what only the SQLite backend has (its file,
// its driver); the PostgreSQL pass leaves it to the SQLite one.
func sqliteOnly(t testing.TB) {
	t.Helper()
	if onPostgres {
		t.Skip("tests the SQLite file itself; run in the SQLite pass")
	}
}

// serverWith is serverAt for a test that sets any of the app's options.
func serverWith(t testing.TB, dir string, clock *tessera.ManualClock, configure func(*app.Options)) (*testServer, func()) {
	t.Helper()
	o := app.Options{DataDir: dir, Clock: clock, Core: core.DefaultConfig(), AdminKey: adminKey,
		HTTP: httpapi.Config{PublicURL: "http://127.0.0.1:8787", Version: "test"}}
	if onPostgres {
		url, _ := pgSchemas.LoadOrStore(dir, pgtest.Schema(t))
		o.Store = url.(string)
	}
	configure(&o)
	a, err := app.Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	// The same http.Server and listener as `tessera serve`; outside
	// benchmarks every exchange is held to the API description at the end
	// (contract_test.go).
	hs := httptest.NewUnstartedServer(a.API)
	hs.Config = a.API.HTTPServer()
	var c *contract
	if _, bench := t.(*testing.B); !bench {
		c = newContract(a.API)
		hs.Config.Handler = c
		doc := openAPIDoc(t, a.API)
		t.Cleanup(func() { c.check(t, doc) })
	}
	hs.Listener = a.API.Listener(hs.Listener)
	hs.Start()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			a.Core.Close()
			hs.Close()
			a.Close()
		})
	}
	t.Cleanup(stop)
	return &testServer{t: t, URL: hs.URL, Clock: clock, Meter: a.Meter, DB: a.Store, Core: a.Core, HTTP: hs, Dir: dir, contract: c}, stop
}

// rowsWritten returns the storage rows fn's requests wrote, by the meter.
func (s *testServer) rowsWritten(fn func()) int64 {
	before, _ := s.Meter.Lifetime()
	fn()
	after, _ := s.Meter.Lifetime()
	return after - before
}

// response is a finished HTTP exchange.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

// decode unmarshals the body into v, failing the test if it cannot.
func (r *response) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
}

// errorCode returns the code of an error body ("" if none).
func (r *response) errorCode() string {
	var e httpapi.ErrorBody
	_ = json.Unmarshal(r.Body, &e)
	return string(e.Error.Code)
}

// do sends a request. body may be nil, a string or []byte (sent as is), or
// any value (sent as JSON). headers are name, value pairs.
func (s *testServer) do(method, path, key string, body any, headers ...string) *response {
	s.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewReader([]byte(b))
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			s.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	res, err := http.DefaultClient.Do(s.request(context.Background(), method, path, key, rd, headers...))
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return &response{Status: res.StatusCode, Header: res.Header, Body: b}
}

// request makes a request of the server with key (none for "") and
// headers, name, value pairs.
func (s *testServer) request(ctx context.Context, method, path, key string, body io.Reader, headers ...string) *http.Request {
	s.t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, s.URL+path, body)
	if err != nil {
		s.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return req
}

// must sends a request and fails the test unless it answers want.
func (s *testServer) must(want int, method, path, key string, body any, headers ...string) *response {
	s.t.Helper()
	r := s.do(method, path, key, body, headers...)
	if r.Status != want {
		s.t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.Status, want, r.Body)
	}
	return r
}

// newKey creates a principal of kind with a key holding scopes.
func (s *testServer) newKey(kind string, scopes ...string) (key, principalID string) {
	s.t.Helper()
	var p tessera.Principal
	s.must(201, "POST", "/v1/admin/principals", adminKey, map[string]any{"kind": kind, "display_name": kind}).decode(s.t, &p)
	var k struct {
		Key string `json:"key"`
	}
	s.must(201, "POST", "/v1/admin/keys", adminKey, map[string]any{"principal_id": p.ID, "scopes": scopes}).decode(s.t, &k)
	return k.Key, p.ID
}

// claimed is a granted claim as the API returns it.
type claimed struct {
	Lease tessera.Lease `json:"lease"`
	Task  tessera.Task  `json:"task"`
}

// enqueue creates a task in ns with the given body fields and returns it.
func (s *testServer) enqueue(ns, key string, fields map[string]any) tessera.Task {
	s.t.Helper()
	if fields["title"] == nil {
		fields["title"] = "test task"
	}
	var t tessera.Task
	s.must(201, "POST", nsPath(ns, "/v1/tasks"), key, fields).decode(s.t, &t)
	return t
}

// claim claims from queue in ns and returns the grant; it fails the test
// on anything but 200.
func (s *testServer) claim(ns, key, queue string) claimed {
	s.t.Helper()
	var c claimed
	s.must(200, "POST", nsPath(ns, "/v1/claims"), key, map[string]any{"queue": queue}).decode(s.t, &c)
	return c
}

// nsPath prefixes path with /ns/{ns} unless ns is main.
func nsPath(ns, path string) string {
	if ns == "" || ns == tessera.MainNamespace {
		return path
	}
	return "/ns/" + ns + path
}
