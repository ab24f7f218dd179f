package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/httpapi"
	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// The public state of SPEC §3.2 and §10: /healthz, /v1/health, /board and
// /v1/public/activity.

var publicPaths = []string{"/healthz", "/v1/health", "/board", "/v1/public/activity"}

// meteredAPI is a second HTTP front over a test server's core whose
// request log is kept, so a test reads the rows each request cost as the
// server itself reports them (the rows_read and rows_written of its
// request log line).
type meteredAPI struct {
	api *httpapi.Server
	logBuffer
}

func newMeteredAPI(t *testing.T, s *testServer) *meteredAPI {
	t.Helper()
	m := &meteredAPI{}
	api, err := httpapi.New(s.Core, slog.New(slog.NewJSONHandler(&m.logBuffer, nil)), httpapi.Config{PublicURL: "http://127.0.0.1:8787", Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	m.api = api
	return m
}

// meteredResponse is a response with the rows its request cost.
type meteredResponse struct {
	*response
	Read, Written int64
}

// do sends one request through the metered front; headers are name,
// value pairs.
func (m *meteredAPI) do(t *testing.T, path, key string, headers ...string) meteredResponse {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	m.mu.Lock()
	m.b.Reset()
	m.mu.Unlock()
	m.api.ServeHTTP(rec, req)
	var line struct {
		Msg         string `json:"msg"`
		RowsRead    int64  `json:"rows_read"`
		RowsWritten int64  `json:"rows_written"`
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	found := false
	sc := bufio.NewScanner(bytes.NewReader(m.b.Bytes()))
	for sc.Scan() {
		if err := json.Unmarshal(sc.Bytes(), &line); err == nil && line.Msg == "op" {
			found = true
		}
	}
	if !found {
		t.Fatalf("GET %s: no operation log line in %s", path, m.b.String())
	}
	res := &response{Status: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}
	return meteredResponse{response: res, Read: line.RowsRead, Written: line.RowsWritten}
}

// health reads /v1/health in ns (keyless in main).
func (s *testServer) health(ns, key string) core.Health {
	s.t.Helper()
	var h core.Health
	s.must(200, "GET", nsPath(ns, "/v1/health"), key, nil).decode(s.t, &h)
	return h
}

// queueHealth returns the named queue of h, failing the test if absent.
func queueHealth(t *testing.T, h core.Health, queue string) core.QueueHealth {
	t.Helper()
	for _, q := range h.Queues {
		if q.Queue == queue {
			return q
		}
	}
	t.Fatalf("queue %q not in health %+v", queue, h)
	return core.QueueHealth{}
}

// refreshRows drops main's snapshot and returns the rows a refresh of
// health (or of the board) reads, measured by the meter on the core call.
func refreshRows(t *testing.T, s *testServer, board bool) int64 {
	t.Helper()
	s.Core.StateChanged(tessera.MainNamespace)
	ctx, usage := meter.WithUsage(context.Background())
	var err error
	if board {
		_, err = s.Core.Board(ctx, nil, tessera.MainNamespace)
	} else {
		_, err = s.Core.Health(ctx, nil, tessera.MainNamespace)
	}
	if err != nil {
		t.Fatal(err)
	}
	if w := usage.Written.Load(); w != 0 {
		t.Errorf("a refresh wrote %d rows", w)
	}
	return usage.Read.Load()
}

// insertPublicTasks stores n public tasks in main straight through the
// store, spread over three queues, the first few leased, one in five done.
func insertPublicTasks(t *testing.T, s *testServer, from, n int) {
	ctx := t.Context()
	t.Helper()
	now := s.Clock.Now()
	queues := []string{"default", "gpu", "cpu"}
	err := s.DB.Update(context.Background(), func(tx store.Tx) error {
		for i := from; i < from+n; i++ {
			task := &tessera.Task{Namespace: "main", ID: fmt.Sprintf("01BULK%08d", i), Queue: queues[i%3],
				Title: fmt.Sprintf("bulk %d", i), Brief: strings.Repeat("b", 1000), Payload: json.RawMessage(`{"n":1}`),
				Labels: []string{}, Public: true, MaxAttempts: 3, State: tessera.StateReady, RunAt: now.Add(-time.Minute),
				CreatedBy: "p", CreatedAt: now, UpdatedAt: now}
			switch {
			case i < 6:
				task.State = tessera.StateLeased
				task.Lease = &tessera.Lease{RunID: "r" + task.ID, Holder: "p", TokenHash: []byte{1}, Seconds: 60,
					ExpiresAt: now.Add(time.Duration(i-3) * time.Minute)}
			case i%5 == 0:
				task.State = tessera.StateSucceeded
			}
			if err := tx.TaskInsert(ctx, task); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// §3.2: without a key on the main namespace the public routes answer, and
// they skip every key and identity lookup: a refresh reads exactly the rows
// of the snapshot, and a repeat within 15 s reads and writes nothing.
func TestPublicKeylessMainMakesNoKeyLookup(t *testing.T) {
	s := newTestServer(t)
	m := newMeteredAPI(t, s)
	s.enqueue("main", adminKey, map[string]any{"title": "public one", "public": true})

	for _, path := range publicPaths {
		s.Clock.Advance(core.SnapshotTTL) // every route starts from a stale snapshot
		first := m.do(t, path, "")
		if first.Status != 200 {
			t.Fatalf("keyless %s: %d %s", path, first.Status, first.Body)
		}
		if first.Written != 0 {
			t.Errorf("keyless %s wrote %d rows: no audit, no observation without a key", path, first.Written)
		}
		repeat := m.do(t, path, "")
		if repeat.Read != 0 || repeat.Written != 0 {
			t.Errorf("keyless %s repeated within 15 s: read %d, written %d rows; want 0, 0", path, repeat.Read, repeat.Written)
		}
	}

	// The first keyless read costs what a refresh costs, not a row more: no
	// key, principal or identity was looked up.
	s.Clock.Advance(core.SnapshotTTL)
	keyless := m.do(t, "/v1/health", "")
	if refresh := refreshRows(t, s, false); keyless.Read != refresh {
		t.Errorf("keyless /v1/health read %d rows, a bare refresh %d: the request read something else", keyless.Read, refresh)
	}
}

// §3.2 and §4: under /ns/{ns} the public routes need a key with a grant
// for ns and read; without one, 401, and with the wrong grant, 403.
func TestPublicRoutesUnderNamespaceNeedAGrant(t *testing.T) {
	s := newTestServer(t)
	other, _ := s.newKey(tessera.KindAgent, "namespace:elsewhere", "read")
	noRead, _ := s.newKey(tessera.KindAgent, "namespace:x", "enqueue")
	reader, _ := s.newKey(tessera.KindAgent, "namespace:x", "read")
	for _, path := range publicPaths {
		wantError(t, s.do("GET", "/ns/x"+path, "", nil), 401, "unauthorized", "")
		wantError(t, s.do("GET", "/ns/x"+path, "tsk_nosuchkey_abcdefghijklmnopqrstuvwx", nil), 401, "unauthorized", "")
		wantError(t, s.do("GET", "/ns/x"+path, other, nil), 403, "forbidden", "")
		wantError(t, s.do("GET", "/ns/x"+path, noRead, nil), 403, "forbidden", "")
		s.must(200, "GET", "/ns/x"+path, reader, nil, "Accept", "application/json")
		// A key sent to main is checked like any key.
		wantError(t, s.do("GET", path, "tsk_nosuchkey_abcdefghijklmnopqrstuvwx", nil), 401, "unauthorized", "")
		wantError(t, s.do("GET", path, reader, nil), 403, "forbidden", "")
	}
	// The namespace read with a key, never written, answers empty and
	// creates nothing.
	h := s.health("x", reader)
	if len(h.Queues) != 0 || h.Namespace != "x" {
		t.Errorf("health of an empty namespace: %+v", h)
	}
	var ns struct {
		Namespaces []store.Namespace `json:"namespaces"`
	}
	s.must(200, "GET", "/v1/admin/namespaces", adminKey, nil).decode(t, &ns)
	for _, n := range ns.Namespaces {
		if n.Name == "x" {
			t.Errorf("reading x's public state created it")
		}
	}
}

// §10: the snapshot is kept 15 s (time = when taken), dropped by a state
// change in its namespace, and refreshed after 15 s.
func TestHealthSnapshotReuseInvalidationExpiry(t *testing.T) {
	s := newTestServer(t)
	m := newMeteredAPI(t, s)
	first := s.health("main", "")
	if first.Status != "ok" || first.Namespace != "main" || len(first.Queues) != 0 {
		t.Fatalf("health of an empty main: %+v", first)
	}

	s.Clock.Advance(5 * time.Second)
	again := m.do(t, "/v1/health", "")
	var h core.Health
	again.decode(t, &h)
	if !h.Time.Equal(first.Time) || again.Read != 0 {
		t.Errorf("within 15 s: time %v (first %v), %d rows read; want the same snapshot and 0 rows", h.Time, first.Time, again.Read)
	}

	// A state change drops it: the next read is a new snapshot showing it.
	task := s.enqueue("main", adminKey, map[string]any{"title": "watch me", "public": true})
	h = s.health("main", "")
	if !h.Time.After(first.Time) {
		t.Errorf("after an enqueue the snapshot time is still %v", h.Time)
	}
	if q := queueHealth(t, h, "default"); q.Counts["ready"] != 1 || h.Totals.Counts["ready"] != 1 {
		t.Errorf("after a public enqueue: %+v", h)
	}
	// A change in another namespace does not.
	taken := h.Time
	s.Clock.Advance(time.Second)
	s.enqueue("elsewhere", adminKey, map[string]any{"public": true})
	if h = s.health("main", ""); !h.Time.Equal(taken) {
		t.Errorf("a change in another namespace dropped main's snapshot (time %v, was %v)", h.Time, taken)
	}
	// Private tasks change the snapshot (any state change) but not its counts.
	s.enqueue("main", adminKey, map[string]any{"title": "private"})
	if h = s.health("main", ""); h.Time.Equal(taken) || h.Totals.Counts["ready"] != 1 {
		t.Errorf("after a private enqueue: %+v", h)
	}
	taken = h.Time

	// Past 15 s it is refreshed even when nothing changed.
	s.Clock.Advance(core.SnapshotTTL - time.Millisecond)
	if h = s.health("main", ""); !h.Time.Equal(taken) {
		t.Errorf("at 15 s minus 1 ms the snapshot was refreshed")
	}
	s.Clock.Advance(time.Millisecond)
	if h = s.health("main", ""); !h.Time.Equal(s.Clock.Now()) {
		t.Errorf("after 15 s the snapshot time is %v, want now %v", h.Time, s.Clock.Now())
	}

	// /healthz answers from the same snapshot.
	var hz struct {
		Status string    `json:"status"`
		Time   time.Time `json:"time"`
	}
	s.must(200, "GET", "/healthz", "", nil).decode(t, &hz)
	if hz.Status != "ok" || !hz.Time.Equal(h.Time) {
		t.Errorf("/healthz = %+v, health time %v", hz, h.Time)
	}

	// The claim moves the task from ready to leased.
	s.claim("main", adminKey, "default")
	h = s.health("main", "")
	if q := queueHealth(t, h, "default"); q.Counts["ready"] != 0 || q.Counts["leased"] != 1 || q.LiveLeases != 1 {
		t.Errorf("after the claim of %s: %+v", task.ID, q)
	}
}

// §10: expired-but-unnoticed leases are counted, and the oldest ready task
// is aged, from the snapshot.
func TestHealthCountsExpiredLeasesAndOldestReady(t *testing.T) {
	s := newTestServer(t)
	s.enqueue("main", adminKey, map[string]any{"title": "to lease", "public": true, "queue": "work"})
	s.must(200, "POST", "/v1/claims", adminKey, map[string]any{"queue": "work", "lease_seconds": 10})
	s.enqueue("main", adminKey, map[string]any{"title": "waiting", "public": true, "queue": "work"})
	s.enqueue("main", adminKey, map[string]any{"title": "later", "public": true, "queue": "work",
		"run_at": s.Clock.Now().Add(time.Hour)})

	q := queueHealth(t, s.health("main", ""), "work")
	if q.Counts["leased"] != 1 || q.LiveLeases != 1 || q.ExpiredLeases != 0 || q.Counts["ready"] != 2 {
		t.Errorf("with a live lease: %+v", q)
	}
	if q.OldestReadyAgeSeconds == nil || *q.OldestReadyAgeSeconds != 0 {
		t.Errorf("oldest ready age %v, want 0", q.OldestReadyAgeSeconds)
	}

	// Past the lease and the snapshot's life: nobody noticed the lapse, the
	// health does.
	s.Clock.Advance(20 * time.Second)
	h := s.health("main", "")
	q = queueHealth(t, h, "work")
	if q.Counts["leased"] != 1 || q.LiveLeases != 0 || q.ExpiredLeases != 1 || h.Totals.ExpiredLeases != 1 {
		t.Errorf("after the lease ran out: %+v", q)
	}
	if q.OldestReadyAgeSeconds == nil || *q.OldestReadyAgeSeconds != 20 {
		t.Errorf("oldest ready age %v, want 20 s (the scheduled task does not count)", q.OldestReadyAgeSeconds)
	}
}

// §10 beyond the original: counts are kept incrementally, so the rows a
// refresh reads do not grow with the number of public tasks.
func TestHealthRefreshRowsDoNotGrowWithTasks(t *testing.T) {
	s := newTestServer(t)
	insertPublicTasks(t, s, 0, 50)
	health50, board50 := refreshRows(t, s, false), refreshRows(t, s, true)
	insertPublicTasks(t, s, 50, 450)
	health500, board500 := refreshRows(t, s, false), refreshRows(t, s, true)

	// The HTTP figure, as the server's request log reports it.
	m := newMeteredAPI(t, s)
	s.Core.StateChanged("main")
	first := m.do(t, "/v1/health", "")
	repeat := m.do(t, "/v1/health", "")
	t.Logf("health refresh: %d rows read at 50 public tasks, %d at 500; board refresh: %d and %d rows (board shows at most %d tasks)",
		health50, health500, board50, board500, core.BoardTaskLimit)
	t.Logf("GET /v1/health with 500 public tasks: first call %d rows read, repeat within 15 s %d", first.Read, repeat.Read)

	if health500 != health50 {
		t.Errorf("health refresh rows grew with the tasks: %d at 50, %d at 500", health50, health500)
	}
	if first.Read != health500 || repeat.Read != 0 {
		t.Errorf("GET /v1/health read %d then %d rows; want %d then 0", first.Read, repeat.Read, health500)
	}
	// The board adds its page of tasks (at most BoardTaskLimit) to the
	// health: bounded, however many tasks there are. (PostgreSQL counts
	// the rows its plans visit, and reads tables this small whole when
	// that is cheaper: the bound is SQLite's rows returned.)
	if !onPostgres && (board500-health500 > int64(core.BoardTaskLimit) || board50-health50 != 50) {
		t.Errorf("board refresh rows: %d at 50 tasks, %d at 500 (health %d)", board50, board500, health500)
	}
	var h core.Health
	first.decode(t, &h)
	if h.Totals.Counts["ready"]+h.Totals.Counts["leased"]+h.Totals.Counts["succeeded"] != 500 {
		t.Errorf("health counts %v, want 500 tasks in all", h.Totals.Counts)
	}
}

// Concurrent readers of a stale snapshot share one refresh.
func TestSnapshotRefreshesCollapse(t *testing.T) {
	s := newTestServer(t)
	insertPublicTasks(t, s, 0, 30)
	one := refreshRows(t, s, false)
	s.Core.StateChanged("main")
	var wg sync.WaitGroup
	var mu sync.Mutex
	var total int64
	times := map[time.Time]bool{}
	for range 8 {
		wg.Go(func() {
			ctx, usage := meter.WithUsage(context.Background())
			h, err := s.Core.Health(ctx, nil, "main")
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			total += usage.Read.Load()
			times[h.Time] = true
			mu.Unlock()
		})
	}
	wg.Wait()
	if total != one || len(times) != 1 {
		t.Errorf("8 concurrent reads of a stale snapshot read %d rows in all (one refresh reads %d) and saw %d snapshot times",
			total, one, len(times))
	}
}

// §3.2: /healthz answers 503 only when the snapshot cannot be built.
func TestHealthzUnavailableWithoutStorage(t *testing.T) {
	hs, bs, _ := newBrokenServer(t)
	res, err := http.Get(hs.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	var e errBody
	if err := json.NewDecoder(res.Body).Decode(&e); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 503 || e.Error.Code != "unavailable" || bs.calls == 0 {
		t.Errorf("/healthz over a broken store: %d %+v after %d store calls", res.StatusCode, e, bs.calls)
	}
}

// §3.2: /board shows public tasks by state and public buckets' heads with
// their values, as JSON for Accept: application/json; nothing private, and
// no brief or payload.
func TestBoardJSONShowsPublicTasksAndRecordHeads(t *testing.T) {
	s := newTestServer(t)
	pub := s.enqueue("main", adminKey, map[string]any{"title": "render the map", "public": true,
		"brief": "SECRET-BRIEF", "payload": map[string]any{"k": "SECRET-PAYLOAD"}})
	s.enqueue("main", adminKey, map[string]any{"title": "private work"})
	s.must(200, "PUT", "/v1/buckets/results", adminKey, map[string]any{"public": true})
	s.must(201, "PUT", "/v1/records/results/map-1", adminKey, map[string]any{"value": map[string]any{"tiles": 42, "status": "done"}})
	s.must(201, "PUT", "/v1/records/hidden/secret", adminKey, map[string]any{"value": "SECRET-RECORD"})

	r := s.must(200, "GET", "/board", "", nil, "Accept", "application/json")
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("Content-Type %q", ct)
	}
	for _, secret := range []string{"SECRET", "private work", "brief", "payload"} {
		if bytes.Contains(r.Body, []byte(secret)) {
			t.Errorf("the board shows %q: %s", secret, r.Body)
		}
	}
	var b core.Board
	r.decode(t, &b)
	ready := b.Tasks["ready"]
	if len(ready) != 1 || ready[0].ID != pub.ID || ready[0].Title != "render the map" || ready[0].State != "ready" {
		t.Errorf("ready tasks on the board: %+v", ready)
	}
	if len(b.Buckets) != 1 || b.Buckets[0].Name != "results" || len(b.Buckets[0].Records) != 1 {
		t.Fatalf("buckets on the board: %+v", b.Buckets)
	}
	rec := b.Buckets[0].Records[0]
	var v map[string]any
	if err := json.Unmarshal(rec.Value, &v); err != nil || rec.Key != "map-1" || rec.Version != 1 || v["tiles"] != float64(42) {
		t.Errorf("record head on the board: %+v (%v)", rec, err)
	}
	if b.Health.Totals.Counts["ready"] != 1 || !b.Time.Equal(b.Health.Time) {
		t.Errorf("the board's health: %+v", b.Health)
	}

	// The board refreshed health too: /v1/health is the same snapshot.
	if h := s.health("main", ""); !h.Time.Equal(b.Time) {
		t.Errorf("health time %v, board time %v", h.Time, b.Time)
	}

	// A browser gets the page.
	page := s.must(200, "GET", "/board", "", nil, "Accept", "text/html,application/xhtml+xml,application/json;q=0.9")
	for _, want := range []string{"text/html"} {
		if !strings.HasPrefix(page.Header.Get("Content-Type"), want) {
			t.Errorf("page Content-Type %q", page.Header.Get("Content-Type"))
		}
	}
	for _, want := range []string{"render the map", `http-equiv="refresh"`, "map-1", "&#34;tiles&#34;: 42"} {
		if !bytes.Contains(page.Body, []byte(want)) {
			t.Errorf("the page lacks %q", want)
		}
	}
	// The one script is the board's own, from this server (it follows
	// the public event stream); nothing inline runs.
	if bytes.Contains(page.Body, []byte("SECRET")) || bytes.Count(page.Body, []byte("<script")) != 1 ||
		!bytes.Contains(page.Body, []byte(`<script src="/console/board.js" defer></script>`)) {
		t.Errorf("the page shows a secret or runs a script other than the board's")
	}
}

// §3.2: the activity feed shows public events of the last 24 h, redacted,
// newest first, a page at a time.
func TestActivityShowsPublicEventsRedacted(t *testing.T) {
	s := newTestServer(t)
	worker, workerID := s.newKey(tessera.KindAgent, "namespace:main", "read", "enqueue", "claim")
	s.enqueue("main", worker, map[string]any{"title": "public A", "public": true})
	s.enqueue("main", worker, map[string]any{"title": "private B"})

	var page core.ActivityPage
	r := s.must(200, "GET", "/v1/public/activity", "", nil)
	r.decode(t, &page)
	if len(page.Events) != 1 {
		t.Fatalf("activity after one public and one private enqueue: %s", r.Body)
	}
	e := page.Events[0]
	if e.Action != core.ActTaskEnqueue || e.Title != "public A" || e.By != tessera.KindAgent || e.ByKind != tessera.KindAgent {
		t.Errorf("event %+v", e)
	}
	for _, leak := range []string{keyID(t, worker), workerID, "key_id", "ip_hash", "principal_id", "token", "private B"} {
		if bytes.Contains(r.Body, []byte(leak)) {
			t.Errorf("the activity feed shows %q: %s", leak, r.Body)
		}
	}

	// A claim and more enqueues; two at a time, newest first.
	s.claim("main", worker, "default")
	s.enqueue("main", worker, map[string]any{"title": "public C", "public": true})
	var seen []string
	cursor := ""
	for range 5 {
		var p core.ActivityPage
		s.must(200, "GET", "/v1/public/activity?limit=2&cursor="+cursor, "", nil).decode(t, &p)
		for _, e := range p.Events {
			seen = append(seen, e.Action+" "+e.Title)
		}
		if cursor = p.NextCursor; cursor == "" {
			break
		}
	}
	want := []string{core.ActTaskEnqueue + " public C", core.ActClaim + " public A", core.ActTaskEnqueue + " public A"}
	if strings.Join(seen, ", ") != strings.Join(want, ", ") {
		t.Errorf("activity pages: %q, want %q", seen, want)
	}
	wantError(t, s.do("GET", "/v1/public/activity?cursor=!!", "", nil), 400, "invalid_request", "cursor")
}

// A keyed read of the public state is an audited read of its namespace.
func TestPublicStateWithKeyIsAudited(t *testing.T) {
	s := newTestServer(t)
	reader, _ := s.newKey(tessera.KindAgent, "namespace:x", "read")
	s.must(200, "GET", "/ns/x/v1/health", reader, nil)
	var audit struct {
		Events []tessera.AuditEvent `json:"events"`
	}
	s.must(200, "GET", "/v1/me/audit", reader, nil).decode(t, &audit)
	found := false
	for _, e := range audit.Events {
		found = found || e.Action == core.ActHealth && e.Namespace == "x"
	}
	if !found {
		t.Errorf("no %s event in %+v", core.ActHealth, audit.Events)
	}
}

// §13: while storage refuses writes, the keyless public state still
// answers, from reads and snapshots; a keyed read, which needs its audit
// row, answers 503.
func TestPublicStateAnswersWhileWritesRefused(t *testing.T) {
	s := newTestServer(t)
	reader, _ := s.newKey(tessera.KindAgent, "namespace:x", "read")
	s.enqueue("main", adminKey, map[string]any{"title": "still shown", "public": true})
	if err := s.Meter.SetAllowance(context.Background(), meter.Allowance{RowsWrittenPerDay: 1}); err != nil {
		t.Fatal(err)
	}
	s.Clock.Advance(core.SnapshotTTL)
	for _, path := range publicPaths {
		r := s.must(200, "GET", path, "", nil, "Accept", "application/json")
		if path == "/board" && !bytes.Contains(r.Body, []byte("still shown")) {
			t.Errorf("the board while writes are refused: %s", r.Body)
		}
	}
	wantError(t, s.do("GET", "/ns/x/v1/health", reader, nil), 503, "storage_quota_exhausted", "")
}
