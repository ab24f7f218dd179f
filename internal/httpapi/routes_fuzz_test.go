package httpapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/app"
	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/httpapi"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// FuzzRoutes sends fuzzed requests to every route of one real server (a
// SQLite file, seeded with tasks, a held lease, a record and blobs) and
// holds every answer to SPEC §5: no input makes the server panic, hang or
// answer 500; every failure carries the error body with a known code and
// the status that code maps to; a /v1 answer is JSON; and the exchange is
// one the API description allows (contract_test.go).
//
// An input is a route (a pattern of the server, or any string, which then
// picks one by hash), flags (the key, Idempotency-Key, method, how path
// values are written, body framing, Accept), the path values separated by
// commas (empty: the fixture's), the raw query and the body. Args, query
// and body may name the fixture's ids with markers: $TASK (the task the
// lease holds), $READY, $LEASE (its token), $UPLOAD, $BLOB (a sha256),
// $PRINCIPAL, $KEYID, $BUCKET, $RKEY.
func FuzzRoutes(f *testing.F) {
	fx := newRouteFixture(f)
	for _, s := range routeSeeds {
		if !slices.Contains(fx.patterns, s.route) {
			// It would be fuzzed on whatever route its name hashes to.
			f.Fatalf("seed route %q is none of the server's patterns", s.route)
		}
		f.Add(s.route, s.flags, s.args, s.query, []byte(s.body))
	}
	// Every pattern once as it is, with the fixture's ids and no body.
	for _, p := range fx.patterns {
		f.Add(p, uint16(0), "", "", []byte(nil))
	}
	f.Fuzz(func(t *testing.T, route string, flags uint16, args, query string, body []byte) {
		fx.exchange(t, route, flags, args, query, body)
	})
}

// Flags of a fuzz input, low bits first.
const (
	// flagKeyMask picks the credential: 0–2 the admin key, 3 none, 4 a
	// session's key, 5 a key that may only read main, 6 an unknown key,
	// 7 the admin key under another scheme.
	flagKeyMask    = 0b111
	flagIdemShift  = 3 // 3 bits: which Idempotency-Key
	flagSwapMethod = 1 << 6
	flagMethodSh   = 7 // 3 bits: the method a swap takes
	flagRawPath    = 1 << 10
	flagChunked    = 1 << 11
	flagAcceptJSON = 1 << 12
	flagReadyTask  = 1 << 13 // {id} of /tasks/ is the ready task, not the held one
	flagExpect     = 1 << 14
)

var fuzzMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "BREW"}

// idempotencyKeys are the Idempotency-Key choices: none (half the
// values), two valid keys, one over the 128-character bound, one not
// printable ASCII.
var idempotencyKeys = []string{"", "", "", "", "fuzz-a", "fuzz-b", strings.Repeat("k", 129), "clé"}

// routeSeed is one seed input; route is a server pattern.
type routeSeed struct {
	route string
	flags uint16
	args  string
	query string
	body  string
}

const (
	seedIdemA   = 4 << flagIdemShift
	seedNoKey   = 3
	seedSession = 4
	seedReader  = 5
)

// routeSeeds hold a valid body for each route that takes one, and the
// shapes §5 says are refused cleanly; FuzzRoutes adds every pattern bare.
var routeSeeds = []routeSeed{
	{"POST /v1/tasks", seedIdemA, "", "", `{"queue":"default","title":"fuzz","brief":"b","payload":{"n":1},"labels":["a"],"priority":2,"public":true,"max_attempts":3,"run_at":"2030-01-01T00:00:00.000Z"}`},
	{"POST /ns/{namespace}/v1/tasks", 0, "", "", `{"title":"in fz"}`},
	{"POST /v1/tasks/batch", 0, "", "", `{"tasks":[{"title":"a"},{"title":"b","queue":"q"}]}`},
	{"GET /v1/tasks", 0, "", "state=ready&queue=default&label=a&limit=2", ``},
	{"GET /v1/tasks", 0, "", "limit=0&cursor=%zz", ``},
	{"POST /v1/tasks/{task_id}/pause", flagReadyTask, "", "", `{}`},
	{"POST /v1/tasks/{task_id}/cancel", 0, "", "", ``},
	{"POST /v1/tasks/{task_id}/retry", flagReadyTask, "", "", `{"x":1}`},
	{"POST /v1/tasks/{task_id}/notes", 0, "", "", `{"body":"a note"}`},
	{"POST /v1/claims", 0, "", "", `{"queue":"default","lease_seconds":60,"wait_seconds":0}`},
	{"POST /v1/claims", seedSession, "", "", `{"queue":"empty"}`},
	{"POST /v1/claims/{task_id}/heartbeat", 0, "", "", `{"lease_token":"$LEASE","lease_seconds":120,"progress":{"pct":50}}`},
	{"POST /v1/claims/{task_id}/submit", seedIdemA, "", "", `{"lease_token":"$LEASE","outcome":"succeeded","result":{"ok":true}}`},
	{"POST /v1/claims/{task_id}/release", 0, "", "", `{"lease_token":"$LEASE"}`},
	{"POST /v1/claims/{task_id}/gate", 0, "", "", `{"lease_token":"$LEASE","key":"k","message":"Which?","timeout_seconds":60,"on_timeout":"continue",` +
		`"schema":{"type":"object","required":["n"],"properties":{"n":{"type":"integer","minimum":1},"s":{"type":"string","enum":["a","b"]}}}}`},
	{"POST /v1/claims/{task_id}/gate", 0, "", "", `{"lease_token":"$LEASE","gates":[{"key":"a","message":"ok?"},{"key":"b","message":"go","url":"https://x.example/"}]}`},
	{"POST /v1/tasks/{task_id}/gates/{key}", 0, "$TASK,k", "", `{"action":"accept","content":{"n":2,"s":"a"}}`},
	{"POST /v1/tasks", 0, "", "", `{"title":"gated","gates":[{"key":"g","message":"approve?","timeout_seconds":1}]}`},
	{"GET /v1/claims/{task_id}/events", 0, "", "since=0&wait=0", ``},
	{"PUT /v1/records/{bucket}/{key}", seedIdemA, "", "", `{"value":{"a":[1,2]},"lease_token":"$LEASE"}`},
	{"PUT /v1/records/{bucket}/{key}", 0, "b,k2", "", `{"value":1,"if_version":7}`},
	{"GET /v1/records/{bucket}/{key}", 0, "", "version=1", ``},
	{"GET /v1/records/{bucket}", 0, "", "prefix=k&limit=1", ``},
	{"PUT /v1/buckets/{bucket}", 0, "", "", `{"public":true}`},
	{"POST /v1/blobs", 0, "", "", `{"sha256":"` + strings.Repeat("ab", 32) + `","size":3,"content_type":"text/plain"}`},
	{"PUT /v1/blobs/uploads/{upload_id}", 0, "", "", `abc`},
	{"POST /v1/blobs/uploads/{upload_id}/commit", seedIdemA, "", "", ``},
	{"POST /v1/admin/principals", 0, "", "", `{"kind":"agent","account":"acct","display_name":"fuzz"}`},
	{"PATCH /v1/admin/principals/{principal_id}", 0, "", "", `{"display_name":"renamed"}`},
	{"POST /v1/admin/keys", 0, "", "", `{"principal_id":"$PRINCIPAL","scopes":["namespace:main","read"],"expires_at":"2031-01-01T00:00:00Z"}`},
	{"PUT /v1/admin/storage/allowance", 0, "", "", `{"rows_written_per_day":0,"rows_read_per_day":0}`},
	{"PUT /v1/admin/namespaces/{ns}/settings", 0, "", "", `{"raw_policy":"namespace"}`},
	{"GET /v1/admin/audit", 0, "", "namespace=main&action=task.enqueue&since=2020-01-01T00:00:00Z", ``},
	{"POST /v1/sessions", seedNoKey, "", "", ``},
	{"POST /mcp", 0, "", "", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"enqueue_task","arguments":{"title":"via mcp"}}}`},
	{"POST /mcp", seedNoKey, "", "", `[{"jsonrpc":"2.0","id":"a","method":"tools/list"},{"jsonrpc":"2.0","method":"notifications/initialized"}]`},
	// malformed
	{"POST /v1/tasks", seedReader, "", "", `{"title":"no scope"}`},
	{"POST /v1/tasks", 0, "", "", `{"title":"\ud800","payload":` + strings.Repeat(`[`, 40) + `}`},
	{"POST /ns/{namespace}/v1/claims", flagRawPath | flagChunked, "Bad_NS", "", `{"queue":1}`},
	{"GET /v1/tasks/{task_id}", flagRawPath, "../..//admin/keys", "", ``},
	{"POST /v1/claims/{task_id}/submit", 6 << flagIdemShift, "", "", `{"lease_token":"stale","outcome":"maybe","error":"it broke"}`},
	{"GET /v1/me", 7, "", "", ``},
	{"GET /v1/me/audit", flagSwapMethod | 5<<flagMethodSh, "", "", `null`},
	{"GET /board", flagAcceptJSON | flagExpect, "", "", "\xff"},
}

// routeFixture is the one server of a fuzz process and what it was seeded
// with.
type routeFixture struct {
	s        *testServer
	doc      []byte
	patterns []string
	errs     *errorLog
	client   *http.Client
	// session and reader are an anonymous session's key and a key that
	// may only read main; spareKey a key free to be revoked, of
	// spare, a principal free to be changed.
	session, reader       string
	spare, spareKey       string
	adminPrincipal        string
	adminKeyID            string
	seeded                map[string]*seededNS
	blobSerial, seedCount int
	// seq numbers the requests (X-Fuzz-Seq), to wait for each exchange's
	// record: the contract records one after the handler returns, which
	// may be after the client has its answer.
	seq int
	// docPaths are the API description's paths, split into segments.
	docPaths map[string][]string
	docOps   map[string]map[string]bool
}

// seededNS is what a namespace was seeded with.
type seededNS struct {
	name          string
	held, ready   string // task ids: one under a lease, one ready
	token         string // the held task's lease token
	upload, blob  string // a declared upload's id; a committed blob's sha256
	bucket, recID string
}

// fuzzNS is the namespace the /ns/{namespace} routes are given.
const fuzzNS = "fz"

func newRouteFixture(f *testing.F) *routeFixture {
	errs := &errorLog{}
	// Claims are admitted without pause, and a session outlasts the run:
	// the fuzzer is one client sending as fast as it can.
	s, _ := serverWith(f, f.TempDir(), tessera.NewManualClock(time.Now()), func(o *app.Options) {
		o.Core.ClaimRate, o.Core.ClaimBurst, o.Core.AdmissionWait = 1e6, 1e6, 10*time.Millisecond
		o.Core.Sessions.Requests = 1 << 30
		o.Log = slog.New(errs)
	})
	fx := &routeFixture{s: s, errs: errs, seeded: map[string]*seededNS{},
		doc: openAPIDoc(f, s.HTTP.Config.Handler),
		client: &http.Client{
			// One idle connection: the next request reuses the last one.
			Transport:     &http.Transport{ExpectContinueTimeout: time.Second, MaxIdleConnsPerHost: 1},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}}
	fx.patterns = slices.Sorted(slices.Values(s.contract.next.(*httpapi.Server).Patterns()))
	var me struct {
		Principal struct {
			ID string `json:"id"`
		} `json:"principal"`
	}
	s.must(200, "GET", "/v1/me", adminKey, nil).decode(f, &me)
	fx.adminPrincipal, fx.adminKeyID = me.Principal.ID, keyID(f, adminKey)
	var sess core.Session
	s.must(201, "POST", "/v1/sessions", "", nil).decode(f, &sess)
	fx.session = sess.Key
	fx.reader, _ = s.newKey("agent", "namespace:main", "read")
	spare, pid := s.newKey("agent", "namespace:"+fuzzNS, "read")
	fx.spare, fx.spareKey = pid, keyID(f, spare)
	for _, ns := range []string{tessera.MainNamespace, fuzzNS} {
		fx.seed(s, ns)
	}
	validatorFor(f, fx.doc) // built once, before the first input
	var doc struct {
		Paths map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(fx.doc, &doc); err != nil {
		f.Fatal(err)
	}
	fx.docPaths, fx.docOps = map[string][]string{}, map[string]map[string]bool{}
	for p, ops := range doc.Paths {
		fx.docPaths[p] = strings.Split(p, "/")
		fx.docOps[p] = map[string]bool{}
		for m := range ops {
			fx.docOps[p][strings.ToUpper(m)] = true
		}
	}
	fx.checkContract(f)
	return fx
}

// seed gives ns a held lease, a ready task, a record and blobs.
func (fx *routeFixture) seed(s *testServer, ns string) {
	n := &seededNS{name: ns, bucket: "b", recID: "k"}
	fx.seeded[ns] = n
	fx.seedTasks(s, n)
	fx.seedUpload(s, n)
	// The blob may still be there: a purge of another namespace seeds
	// this one again.
	data := []byte("a committed blob of " + ns)
	n.blob = sum(data)
	var d declared
	s.do("POST", nsPath(ns, "/v1/blobs"), adminKey, map[string]any{"sha256": n.blob, "size": len(data), "content_type": "text/plain"}).decode(s.t, &d)
	if !d.Exists {
		s.must(200, "PUT", nsPath(ns, "/v1/blobs/uploads/"+d.UploadID), adminKey, data)
		s.must(200, "POST", nsPath(ns, "/v1/blobs/uploads/"+d.UploadID+"/commit"), adminKey, nil)
	}
	s.do("PUT", nsPath(ns, "/v1/records/b/k"), adminKey, map[string]any{"value": map[string]any{"v": 1}})
}

// seedTasks enqueues a ready task and a held one; the held one's queue
// is claimed at once, so the lease is whichever task it grants.
func (fx *routeFixture) seedTasks(s *testServer, n *seededNS) {
	fx.seedCount++
	n.ready = s.enqueue(n.name, adminKey, map[string]any{"queue": "default", "title": "ready " + strconv.Itoa(fx.seedCount)}).ID
	s.enqueue(n.name, adminKey, map[string]any{"queue": "held", "title": "held " + strconv.Itoa(fx.seedCount)})
	c := s.claim(n.name, adminKey, "held")
	n.held, n.token = c.Task.ID, c.Lease.Token
}

// seedUpload declares a blob never declared before and keeps its upload.
func (fx *routeFixture) seedUpload(s *testServer, n *seededNS) {
	fx.blobSerial++
	data := []byte("upload " + strconv.Itoa(fx.blobSerial))
	n.upload = s.declare(201, n.name, adminKey, data, nil).UploadID
}

// exchange sends one fuzz input and checks its answer.
func (fx *routeFixture) exchange(t *testing.T, route string, flags uint16, args, query string, body []byte) {
	pattern := route
	if !slices.Contains(fx.patterns, pattern) {
		h := sha256.Sum256([]byte(route))
		pattern = fx.patterns[(int(h[0])<<8|int(h[1]))%len(fx.patterns)]
	}
	method, tmpl, _ := strings.Cut(pattern, " ")
	ns := tessera.MainNamespace
	if strings.HasPrefix(tmpl, "/ns/{namespace}/") {
		ns = fuzzNS
	}
	n := fx.seeded[ns]
	markers := strings.NewReplacer("$TASK", n.held, "$READY", n.ready, "$LEASE", n.token, "$UPLOAD", n.upload,
		"$BLOB", n.blob, "$PRINCIPAL", fx.spare, "$KEYID", fx.spareKey, "$BUCKET", n.bucket, "$RKEY", n.recID)
	args, query = markers.Replace(args), markers.Replace(query)
	body = []byte(markers.Replace(string(body)))
	if flags&flagSwapMethod != 0 {
		method = fuzzMethods[flags>>flagMethodSh&7]
	}

	var values []string
	if args != "" {
		values = strings.Split(args, ",")
	}
	path := fillPath(tmpl, values, flags&flagRawPath != 0, func(name string) string {
		switch name {
		case "namespace", "ns":
			return fuzzNS
		case "task":
			return n.held
		case "id":
			switch {
			case strings.Contains(tmpl, "/admin/principals/"):
				return fx.spare
			case strings.Contains(tmpl, "/admin/keys/"):
				return fx.spareKey
			case flags&flagReadyTask != 0:
				return n.ready
			}
			return n.held
		case "bucket":
			return n.bucket
		case "key":
			return n.recID
		case "upload_id":
			return n.upload
		case "sha256":
			return n.blob
		}
		return "x"
	})
	query = escapeRaw(query, "#")
	if fx.spoils(method, path) || asksToWait(query, body) {
		t.Skip("would revoke or change the fixture's admin, or long-poll")
	}

	// The answer must come within this: the longest wait a fuzz input may
	// ask for is the admission wait; anything longer is a hang.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var rd io.Reader = bytes.NewReader(body)
	if flags&flagChunked != 0 {
		rd = io.NopCloser(rd) // no length: sent chunked
	}
	req, err := http.NewRequestWithContext(ctx, method, fx.s.URL, rd)
	if err != nil {
		t.Fatal(err)
	}
	// Opaque is sent as the request target as it is, so a path may hold
	// what a client should not write: "..", "//", a bad escape.
	req.URL.Opaque, req.URL.RawQuery = path, query
	switch cred := flags & flagKeyMask; cred {
	case 0, 1, 2:
		req.Header.Set("Authorization", "Bearer "+adminKey)
	case seedSession:
		req.Header.Set("Authorization", "Bearer "+fx.session)
	case seedReader:
		req.Header.Set("Authorization", "Bearer "+fx.reader)
	case 6:
		req.Header.Set("Authorization", "Bearer tsk_nosuchkey_abcdefghijklmnopqrstuvwxyz012345")
	case 7:
		req.Header.Set("Authorization", "Basic "+adminKey)
	}
	if k := idempotencyKeys[flags>>flagIdemShift&7]; k != "" {
		req.Header.Set("Idempotency-Key", k)
	}
	if flags&flagAcceptJSON != 0 {
		req.Header.Set("Accept", "application/json")
	}
	if flags&flagExpect != 0 && len(body) > 0 {
		req.Header.Set("Expect", "100-continue")
	}
	fx.seq++
	seq := strconv.Itoa(fx.seq)
	req.Header.Set("X-Fuzz-Seq", seq)
	target := method + " " + path
	if query != "" {
		target += "?" + query
	}
	res, err := fx.client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: no answer within 15 s (body %q)", target, body)
		}
		t.Fatalf("%s: %v (body %q)", target, err, body)
	}
	var got []byte
	if res.StatusCode == http.StatusOK && res.Header.Get("Content-Type") == "text/event-stream" {
		// An event stream does not end: its opening is read, then the
		// client goes away, which ends it.
		got, err = readOpening(res.Body)
	} else {
		got, err = io.ReadAll(res.Body)
	}
	res.Body.Close()
	if err != nil {
		t.Fatalf("%s: reading the answer: %v", target, err)
	}
	r := &response{Status: res.StatusCode, Header: res.Header, Body: got}
	if req.Header.Get("Expect") != "" && !res.Close {
		fx.probeKeptAlive(t, target)
	}
	// net/http answers a request it cannot parse itself (edge.go gives
	// that answer the error body): no handler saw it, so none records it.
	if !bytes.Contains(r.Body, []byte("is not valid HTTP/1.1")) {
		fx.awaitRecord(t, target, seq)
	}
	if msg := fx.errs.take(); msg != "" {
		t.Fatalf("%s (body %q) logged an error: %s; answer %d %s", target, body, msg, r.Status, r.Body)
	}
	if p := checkAnswer(method, pattern, r); p != "" {
		t.Fatalf("%s (body %q): %s; answer %d %s %s", target, body, p, r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	fx.checkContract(t)
	if r.Status < 300 {
		ts := *fx.s
		ts.t = t
		fx.repair(&ts, method, pattern, ns)
	}
}

// probeKeptAlive sends a request on the connection an answer left open,
// which must still be open: the server closes a connection under a body
// it did not read, and must then have said so (Connection: close). The
// probe is a POST, which the client does not retry on a fresh connection.
func (fx *routeFixture) probeKeptAlive(t *testing.T, target string) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", fx.s.URL+"/nope", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := fx.client.Do(req)
	if err != nil {
		t.Fatalf("%s: the answer kept the connection alive, but the next request on it failed: %v", target, err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
}

// awaitRecord waits until the contract has recorded request seq: the
// handler has returned, linger included.
func (fx *routeFixture) awaitRecord(t *testing.T, target, seq string) {
	c := fx.s.contract
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Microsecond) {
		c.mu.Lock()
		recorded := slices.ContainsFunc(c.seen, func(ex exchange) bool { return ex.reqHeader.Get("X-Fuzz-Seq") == seq })
		c.mu.Unlock()
		if recorded {
			return
		}
	}
	t.Fatalf("%s: the handler still runs 15 s after its answer", target)
}

// checkContract holds the exchanges since the last check to the API
// description, then forgets them, so a long run keeps none.
func (fx *routeFixture) checkContract(t testing.TB) {
	t.Helper()
	c := fx.s.contract
	c.mu.Lock()
	seen := c.seen
	c.seen = nil
	c.mu.Unlock()
	seen = slices.DeleteFunc(seen, fx.shadowed)
	for i, ex := range seen {
		switch {
		case strings.HasPrefix(ex.target, "/mcp"):
			// JSON-RPC refuses a message of a batch inside a 200
			// answer, so a 200 says nothing of the request.
			seen[i].reqComplete = false
		case ex.status < 300:
			seen[i].target = asRead(ex.target)
		}
	}
	batch := &contract{routes: c.routes, seen: seen}
	for _, p := range batch.problems(t, fx.doc) {
		t.Errorf("the API description disagrees with the server: %s", p)
	}
}

// asRead is a request target with its query as the server reads it
// (call.query, call.queryInt): the first value of each name, an empty
// one as none, and pairs that do not parse dropped. The API description
// cannot say that an empty value is no value.
func asRead(target string) string {
	path, query, ok := strings.Cut(target, "?")
	if !ok {
		return target
	}
	q, _ := url.ParseQuery(query)
	read := url.Values{}
	for name, vs := range q {
		if vs[0] != "" {
			read.Set(name, vs[0])
		}
	}
	if len(read) == 0 {
		return path
	}
	return path + "?" + read.Encode()
}

// shadowed reports whether the server routed ex to a templated path that
// OpenAPI cannot name for it: a concrete path of the description matches
// it first (OpenAPI matches concrete segments before templated ones) but
// lacks its method, which another matching path has: GET /v1/tasks/batch,
// which the server routes to GET /v1/tasks/{id}.
func (fx *routeFixture) shadowed(ex exchange) bool {
	path, _, _ := strings.Cut(ex.target, "?")
	segs := strings.Split(path, "/")
	method := ex.method
	if method == "HEAD" {
		method = "GET"
	}
	best, fewest, elsewhere := "", -1, false
	for p, tmpl := range fx.docPaths {
		if len(tmpl) != len(segs) {
			continue
		}
		params := 0
		for i, s := range tmpl {
			switch {
			case strings.HasPrefix(s, "{"):
				params++
			case s != segs[i]:
				params = -1
			}
			if params < 0 {
				break
			}
		}
		if params < 0 {
			continue
		}
		elsewhere = elsewhere || fx.docOps[p][method]
		if fewest < 0 || params < fewest {
			best, fewest = p, params
		}
	}
	return best != "" && !fx.docOps[best][method] && elsewhere
}

// repair restores what a successful request may have used up: the lease,
// the ready task, the upload, the spare key, an unlimited allowance.
func (fx *routeFixture) repair(s *testServer, method, pattern, ns string) {
	if method == "GET" || method == "HEAD" || method == "OPTIONS" {
		return
	}
	n := fx.seeded[ns]
	switch {
	case strings.Contains(pattern, "/admin/namespaces/{ns}") && method == "DELETE":
		fx.seed(s, fuzzNS)
	case strings.HasSuffix(pattern, "/admin/storage/allowance"):
		s.must(200, "PUT", "/v1/admin/storage/allowance", adminKey, map[string]any{"rows_written_per_day": 0, "rows_read_per_day": 0})
	case strings.HasSuffix(pattern, "/admin/keys/{id}"):
		k, _ := s.newKey("agent", "namespace:"+fuzzNS, "read")
		fx.spareKey = keyID(s.t, k)
	case strings.Contains(pattern, "/claims") || strings.Contains(pattern, "/tasks"):
		fx.seedTasks(s, n)
	case strings.Contains(pattern, "/blobs"):
		fx.seedUpload(s, n)
	case pattern == "POST /mcp":
		// A tool may have claimed, submitted or committed anything.
		fx.seedTasks(s, n)
		fx.seedUpload(s, n)
	}
	fx.checkContract(s.t)
}

// spoils reports whether a request would take the fixture's admin away:
// revoking its key or changing its principal.
func (fx *routeFixture) spoils(method, path string) bool {
	p, _ := url.PathUnescape(path)
	return method == "DELETE" && strings.Contains(p, fx.adminKeyID) ||
		method == "PATCH" && strings.Contains(p, fx.adminPrincipal)
}

// asksToWait reports whether a request may long-poll (a claim's
// wait_seconds, the events' wait, either through MCP), which would make
// one input cost up to 30 s; the waits have tests of their own. It reads
// keys case-insensitively anywhere in the body, so it errs on the side of
// waiting.
func asksToWait(query string, body []byte) bool {
	q, _ := url.ParseQuery(query)
	if n, err := strconv.ParseInt(q.Get("wait"), 10, 64); err == nil && n > 0 {
		return true
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return false
	}
	var walk func(any) bool
	walk = func(v any) bool {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if num, ok := e.(json.Number); ok && (strings.EqualFold(k, "wait") || strings.EqualFold(k, "wait_seconds")) {
					if f, err := num.Float64(); err != nil || f > 0 {
						return true
					}
				}
				if walk(e) {
					return true
				}
			}
		case []any:
			return slices.ContainsFunc(v, walk)
		}
		return false
	}
	return walk(v)
}

// fillPath writes tmpl's {name} segments: values in order, else def(name).
// Raw values go in as they are, but for bytes no request line may hold;
// the others are escaped as one segment.
func fillPath(tmpl string, values []string, raw bool, def func(string) string) string {
	var b strings.Builder
	i := 0
	for {
		open := strings.IndexByte(tmpl, '{')
		if open < 0 {
			b.WriteString(tmpl)
			return b.String()
		}
		end := strings.IndexByte(tmpl[open:], '}') + open
		b.WriteString(tmpl[:open])
		name := tmpl[open+1 : end]
		tmpl = tmpl[end+1:]
		if name == "$" {
			continue
		}
		v := def(name)
		if i < len(values) && values[i] != "" {
			v = values[i]
		}
		i++
		if raw {
			b.WriteString(escapeRaw(v, "?#"))
		} else {
			b.WriteString(url.PathEscape(v))
		}
	}
}

// escapeRaw percent-encodes the bytes of s that cannot stand in a request
// target (controls, space, non-ASCII) and those in also; everything else,
// "%" included, stays.
func escapeRaw(s, also string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(also, c) >= 0 {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// statusOfCode is SPEC §5's table, with 405 for a method a path does not
// answer (§3.9).
var statusOfCode = map[string]int{
	"invalid_request": 400, "unauthorized": 401, "forbidden": 403, "not_found": 404, "method_not_allowed": 405,
	"lease_lost": 409, "version_conflict": 409, "invalid_state": 409, "idempotency_conflict": 409,
	"payload_too_large": 413, "rate_limited": 429, "storage_quota_exhausted": 503, "unavailable": 503,
}

// checkAnswer returns what is wrong with the answer to a request of
// method on pattern, "" if nothing.
// readOpening reads an event stream up to the end of its first message.
func readOpening(body io.Reader) ([]byte, error) {
	var got []byte
	buf := make([]byte, 512)
	for !bytes.Contains(got, []byte("\n\n")) {
		n, err := body.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			return got, err
		}
	}
	return got, nil
}

func checkAnswer(method, pattern string, r *response) string {
	_, tmpl, _ := strings.Cut(pattern, " ")
	api := strings.HasPrefix(tmpl, "/v1/") || strings.HasPrefix(tmpl, "/ns/{namespace}/v1/")
	ctype := r.Header.Get("Content-Type")
	hasBody := method != "HEAD" && r.Status != http.StatusNoContent && r.Status != http.StatusNotModified
	switch {
	case r.Status >= 500 && r.Status != 503:
		return "a 5xx other than 503"
	case r.Status >= 300 && r.Status < 400 && r.Status != http.StatusNotModified:
		return "a redirect"
	case r.Status < 400:
		raw := strings.HasSuffix(tmpl, "/blobs/{sha256}") && method == "GET"
		if strings.HasSuffix(tmpl, "/v1/events") && method == "GET" && r.Status == http.StatusOK {
			if ctype != "text/event-stream" || !bytes.HasPrefix(r.Body, []byte("retry: ")) {
				return "an event stream that does not open as one"
			}
			return ""
		}
		if api && hasBody && !raw {
			if !strings.HasPrefix(ctype, "application/json") {
				return "a /v1 answer that is not JSON"
			}
			if !json.Valid(r.Body) {
				return "a /v1 answer whose body is not JSON"
			}
		}
		if pattern == "POST /mcp" && hasBody && r.Status == 200 {
			return checkMCP(r.Body)
		}
		return ""
	}
	if !hasBody {
		return ""
	}
	if !strings.HasPrefix(ctype, "application/json") {
		return "an error answer that is not JSON"
	}
	if pattern == "POST /mcp" && bytes.Contains(r.Body, []byte(`"jsonrpc"`)) {
		// A JSON-RPC error: the transport's own refusals (§11).
		var m struct {
			Error *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(r.Body, &m) != nil || m.Error == nil || m.Error.Message == "" || r.Status >= 500 {
			return "an MCP transport error that is no JSON-RPC error"
		}
		return ""
	}
	var e errBody
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || dec.More() {
		return fmt.Sprintf("an error body not of the shape {\"error\":{code,message,details}} (%v)", err)
	}
	want, known := statusOfCode[e.Error.Code]
	switch {
	case !known:
		return fmt.Sprintf("the unknown error code %q", e.Error.Code)
	case want != r.Status:
		return fmt.Sprintf("code %q answered with %d, not %d", e.Error.Code, r.Status, want)
	case e.Error.Message == "":
		return "an error without a message"
	case r.Status == 401 && !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer"):
		return "a 401 without WWW-Authenticate: Bearer"
	case r.Status == 405 && r.Header.Get("Allow") == "":
		return "a 405 without Allow"
	case (r.Status == 429 || e.Error.Code == "storage_quota_exhausted") && r.Header.Get("Retry-After") == "":
		return "a refusal to retry later without Retry-After"
	}
	for k := range e.Error.Details {
		if k != "field" && k != "retry_after" && k != "reset_at" {
			return fmt.Sprintf("an error detail %q §5 does not name", k)
		}
	}
	return ""
}

// checkMCP returns what is wrong with an MCP answer: a JSON-RPC internal
// error or a tool failing with status 500 is the 500 of the transport.
func checkMCP(body []byte) string {
	type answer struct {
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
		Result *struct {
			Structured *struct {
				Status int    `json:"status"`
				Code   string `json:"code"`
			} `json:"structuredContent"`
		} `json:"result"`
	}
	var all []answer
	if bytes.HasPrefix(bytes.TrimSpace(body), []byte("[")) {
		if err := json.Unmarshal(body, &all); err != nil {
			return "an MCP batch answer that is not a JSON-RPC batch"
		}
	} else {
		var one answer
		if err := json.Unmarshal(body, &one); err != nil {
			return "an MCP answer that is not JSON-RPC"
		}
		all = append(all, one)
	}
	for _, a := range all {
		if a.Error != nil && a.Error.Code == -32603 {
			return "an MCP internal error"
		}
		if a.Result != nil && a.Result.Structured != nil && (a.Result.Structured.Status >= 500 && a.Result.Structured.Status != 503 || a.Result.Structured.Code == "internal") {
			return "an MCP tool failing with an internal error"
		}
	}
	return ""
}

// errorLog keeps what the server logs at level Error (a recovered panic,
// an internal error), for the fuzz target to fail on.
type errorLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *errorLog) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelError }

func (l *errorLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	l.mu.Lock()
	l.lines = append(l.lines, b.String())
	l.mu.Unlock()
	return nil
}

func (l *errorLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *errorLog) WithGroup(string) slog.Handler      { return l }

// take returns and forgets what was logged.
func (l *errorLog) take() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := strings.Join(l.lines, "; ")
	l.lines = nil
	return s
}
