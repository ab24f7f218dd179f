package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/client"
	"github.com/tessera-dev/tessera/internal/app"
	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/ids"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/store/postgres/pgtest"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// sseMsg is one message of an event stream.
type sseMsg struct {
	ID, Event, Data string
}

// sseStream reads an open event stream on a goroutine of its own.
type sseStream struct {
	t      testing.TB
	msgs   chan sseMsg
	cancel context.CancelFunc
	ended  chan struct{}
	// keepAlives counts the comments after the opening one.
	keepAlives atomic.Int64
}

// streamWait bounds how long a test waits for a message it expects: a
// stream that sends nothing fails the test instead of hanging it.
const streamWait = 10 * time.Second

// openStream opens GET path (an events route) and fails the test unless
// it is a stream.
func (s *testServer) openStream(path, key string, headers ...string) *sseStream {
	s.t.Helper()
	st, res := s.tryStream(path, key, headers...)
	if st == nil {
		s.t.Fatalf("GET %s: %d %s, want a stream", path, res.Status, res.Body)
	}
	return st
}

// tryStream opens GET path: the stream, or the answer that refused it.
func (s *testServer) tryStream(path, key string, headers ...string) (*sseStream, *response) {
	s.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	res, err := http.DefaultClient.Do(s.request(ctx, "GET", path, key, nil, headers...))
	if err != nil {
		cancel()
		s.t.Fatal(err)
	}
	if res.StatusCode != 200 {
		defer cancel()
		defer res.Body.Close()
		var b strings.Builder
		_, _ = bufio.NewReader(res.Body).WriteTo(&b)
		return nil, &response{Status: res.StatusCode, Header: res.Header, Body: []byte(b.String())}
	}
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		cancel()
		s.t.Fatalf("GET %s: Content-Type %q", path, ct)
	}
	st := &sseStream{t: s.t, msgs: make(chan sseMsg, 4096), cancel: cancel, ended: make(chan struct{})}
	go st.read(res)
	s.t.Cleanup(st.close)
	return st, nil
}

func (st *sseStream) read(res *http.Response) {
	defer close(st.ended)
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	var m sseMsg
	comments := 0
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if m.Event != "" {
				st.msgs <- m
			}
			m = sseMsg{}
		case strings.HasPrefix(line, ":"):
			if comments++; comments > 1 {
				st.keepAlives.Add(1)
			}
		case strings.HasPrefix(line, "id: "):
			m.ID = line[4:]
		case strings.HasPrefix(line, "event: "):
			m.Event = line[7:]
		case strings.HasPrefix(line, "data: "):
			m.Data = line[6:]
		}
	}
}

func (st *sseStream) close() {
	st.cancel()
	<-st.ended
}

// next returns the next message, failing the test if none comes.
func (st *sseStream) next() sseMsg {
	st.t.Helper()
	select {
	case m := <-st.msgs:
		return m
	case <-time.After(streamWait):
		st.t.Fatal("no event came")
	case <-st.ended:
		select {
		case m := <-st.msgs:
			return m
		default:
		}
		st.t.Fatal("the stream ended")
	}
	return sseMsg{}
}

// event returns the next message as an event.
func (st *sseStream) event() core.Event {
	st.t.Helper()
	m := st.next()
	var e core.Event
	if err := json.Unmarshal([]byte(m.Data), &e); err != nil {
		st.t.Fatalf("event %+v: %v", m, err)
	}
	if m.ID != e.ID || m.Event != e.Kind {
		st.t.Fatalf("message id %q event %q, data id %q kind %q", m.ID, m.Event, e.ID, e.Kind)
	}
	return e
}

// quiet fails the test if a message is waiting: what a stream must not
// have sent, once a later message proved everything before it arrived.
func (st *sseStream) quiet() {
	st.t.Helper()
	select {
	case m := <-st.msgs:
		st.t.Fatalf("unexpected message %+v", m)
	default:
	}
}

// short is an event reduced to what the tests compare.
func short(e core.Event) string {
	return fmt.Sprintf("%s %s %s %s", e.Kind, e.Queue, e.State, e.Target)
}

// A stream carries every change of a task's life, in order, with the
// state each left it in: enqueued, claimed, heartbeats (coalesced to one
// per task per 10 s), a failed run, a lapse that ends it dead, a retry, a
// record written under its lease, a queue paused and resumed.
func TestEventStreamFollowsATaskLife(t *testing.T) {
	s := newTestServer(t)
	// The stream has begun once its headers are in: it follows what
	// commits from then on.
	st := s.openStream("/v1/events", adminKey)
	st.quiet()

	task := s.enqueue("main", adminKey, map[string]any{"title": "build <docs> & \u202egnp.exe", "queue": "build", "max_attempts": 2})
	if e := st.event(); short(e) != "task.enqueued build ready "+task.ID || e.TaskID != task.ID || e.Title != task.Title || e.By == "" {
		t.Fatalf("enqueue: %+v", e)
	}
	c := s.claim("main", adminKey, "build")
	if e := st.event(); short(e) != "task.claimed build leased "+task.ID || e.RunID != c.Lease.RunID {
		t.Fatalf("claim: %+v", e)
	}
	beat := func() {
		s.must(200, "POST", "/v1/claims/"+task.ID+"/heartbeat", adminKey, map[string]any{"lease_token": c.Lease.Token})
	}
	beat()
	if e := st.event(); short(e) != "task.heartbeat build leased "+task.ID {
		t.Fatalf("heartbeat: %+v", e)
	}
	s.Clock.Advance(time.Second)
	beat() // within 10 s of the last: coalesced
	s.must(201, "PUT", "/v1/records/reports/r1", adminKey, map[string]any{"value": map[string]string{"page": "<b>1</b>"}, "lease_token": c.Lease.Token})
	if e := st.event(); short(e) != "record.written build  reports/r1" || e.TaskID != task.ID || e.RunID != c.Lease.RunID {
		t.Fatalf("record under the lease (the second heartbeat coalesced): %+v", e)
	}
	s.Clock.Advance(core.HeartbeatEvery)
	beat()
	if e := st.event(); short(e) != "task.heartbeat build leased "+task.ID {
		t.Fatalf("heartbeat 10 s on: %+v", e)
	}
	s.submit("main", adminKey, c, "failed")
	if e := st.event(); short(e) != "task.failed build scheduled "+task.ID {
		t.Fatalf("failed run: %+v", e)
	}
	// The backoff passes; the second and last attempt's lease lapses, and
	// the claim that notices it tells the stream the task is dead.
	s.Clock.Advance(time.Minute)
	var c2 claimed
	s.must(200, "POST", "/v1/claims", adminKey, map[string]any{"queue": "build", "lease_seconds": 10}).decode(t, &c2)
	if e := st.event(); short(e) != "task.claimed build leased "+task.ID || e.RunID != c2.Lease.RunID {
		t.Fatalf("second claim: %+v", e)
	}
	s.Clock.Advance(11 * time.Second)
	s.emptyClaim("main", adminKey, "build")
	if e := st.event(); short(e) != "task.dead build dead "+task.ID || e.Action != core.ActTaskLapse || e.RunID != c2.Lease.RunID {
		t.Fatalf("lapse: %+v", e)
	}
	s.must(200, "POST", "/v1/tasks/"+task.ID+"/retry", adminKey, nil)
	if e := st.event(); short(e) != "task.retried build ready "+task.ID {
		t.Fatalf("retry: %+v", e)
	}
	s.must(200, "POST", "/v1/queues/build/pause", adminKey, nil)
	if e := st.event(); short(e) != "queue.paused build  build" {
		t.Fatalf("pause: %+v", e)
	}
	s.must(200, "POST", "/v1/queues/build/resume", adminKey, nil)
	if e := st.event(); short(e) != "queue.resumed build  build" {
		t.Fatalf("resume: %+v", e)
	}
	// Reads are no events.
	s.task("main", adminKey, task.ID)
	s.must(200, "GET", "/v1/counts", adminKey, nil)
	s.enqueue("main", adminKey, map[string]any{"title": "marker"})
	if e := st.event(); e.Kind != core.KindEnqueued || e.Title != "marker" {
		t.Fatalf("after reads: %+v", e)
	}
	st.quiet()
}

// A stream filtered by queue or task carries only theirs; without a key
// main's stream carries its public events only, without who acted.
func TestEventStreamFilters(t *testing.T) {
	s := newTestServer(t)
	byQueue := s.openStream("/v1/events?queue=mail", adminKey)
	public := s.openStream("/v1/events", "")
	first := s.enqueue("main", adminKey, map[string]any{"title": "first", "queue": "mail"})
	byTask := s.openStream("/v1/events?task="+first.ID, adminKey)
	s.enqueue("main", adminKey, map[string]any{"title": "elsewhere", "queue": "build", "public": true})
	second := s.enqueue("main", adminKey, map[string]any{"title": "second", "queue": "mail", "public": true})
	s.must(200, "POST", "/v1/tasks/"+first.ID+"/cancel", adminKey, nil)

	for _, want := range []string{first.ID, second.ID} {
		if e := byQueue.event(); e.TaskID != want || e.Kind != core.KindEnqueued {
			t.Fatalf("queue stream: %+v, want %s enqueued", e, want)
		}
	}
	if e := byQueue.event(); e.TaskID != first.ID || e.Kind != core.KindCanceled {
		t.Fatalf("queue stream: %+v", e)
	}
	// Opened just after the task's enqueue committed, the task's stream
	// begins with it: a stream begins a moment back, so as to miss
	// nothing that raced its opening.
	for _, want := range []string{core.KindEnqueued, core.KindCanceled} {
		if e := byTask.event(); e.TaskID != first.ID || e.Kind != want {
			t.Fatalf("task stream: %+v, want %s", e, want)
		}
	}
	if e := public.event(); e.Title != "elsewhere" || e.By != "" {
		t.Fatalf("public stream: %+v", e)
	}
	if e := public.event(); e.TaskID != second.ID {
		t.Fatalf("public stream: %+v", e)
	}
	// One more public event proves nothing private came before it.
	s.enqueue("main", adminKey, map[string]any{"title": "last", "queue": "mail", "public": true})
	if e := public.event(); e.Title != "last" {
		t.Fatalf("public stream: %+v", e)
	}
	if e := byQueue.event(); e.Title != "last" {
		t.Fatalf("queue stream: %+v", e)
	}
	for _, st := range []*sseStream{byQueue, public, byTask} {
		st.quiet()
	}
}

// Last-Event-ID resumes after the event it names: what committed while
// the client was away arrives, nothing twice. An id older than the
// retention window is answered with a gap, then events from now.
func TestEventStreamResumes(t *testing.T) {
	s := newTestServer(t)
	st := s.openStream("/v1/events", adminKey)
	s.enqueue("main", adminKey, map[string]any{"title": "one"})
	one := st.event()
	st.close()
	s.enqueue("main", adminKey, map[string]any{"title": "two"})
	s.enqueue("main", adminKey, map[string]any{"title": "three"})

	again := s.openStream("/v1/events", adminKey, "Last-Event-ID", strings.ToLower(one.ID))
	two := again.event()
	// A backend with several writers reads its lag back again (so as to
	// miss no late commit): what it sends again has the same id, which a
	// client drops. One writer (SQLite) sends nothing twice.
	if lag := s.DB.(store.EventOrder).EventLag(); two.ID <= one.ID {
		if lag == 0 || one.Time.Sub(two.Time) > lag {
			t.Fatalf("resumed after %s, sent %+v again", one.ID, two)
		}
		two = again.event()
	}
	if two.Title != "two" {
		t.Fatalf("resumed: %+v", two)
	}
	three := again.event()
	if three.Title != "three" {
		t.Fatalf("resumed: %+v", three)
	}
	again.quiet()
	again.close()

	s.Clock.Advance(core.AuditWindow + time.Minute)
	late := s.openStream("/v1/events", adminKey, "Last-Event-ID", three.ID)
	m := late.next()
	var gap core.Gap
	if err := json.Unmarshal([]byte(m.Data), &gap); err != nil || m.Event != "gap" || gap.After != three.ID || m.ID != gap.ID || gap.ID <= three.ID {
		t.Fatalf("a cursor past the window: %+v (%v)", m, err)
	}
	s.enqueue("main", adminKey, map[string]any{"title": "four"})
	if e := late.event(); e.Title != "four" {
		t.Fatalf("after the gap: %+v", e)
	}

	r := s.do("GET", "/v1/events", adminKey, nil, "Last-Event-ID", "not-an-id")
	wantError(t, r, 400, "invalid_request", "Last-Event-ID")
}

// Streams are bounded per key and in all (429 with Retry-After), need
// read on the namespace, and end when their key is revoked: the client is
// told why in an event: error.
func TestEventStreamLimitsAndAccess(t *testing.T) {
	s := newTestServer(t, func(c *core.Config) { c.StreamsPerKey, c.MaxStreams = 2, 3 })
	reader, _ := s.newKey("agent", "namespace:main", "read")
	other, _ := s.newKey("agent", "namespace:main", "read")
	third, _ := s.newKey("agent", "namespace:main", "read")
	writer, _ := s.newKey("agent", "namespace:main", "write")

	a := s.openStream("/v1/events", reader)
	s.openStream("/v1/events", reader)
	_, r := s.tryStream("/v1/events", reader)
	if wantError(t, r, 429, "rate_limited", ""); r.Header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
	a.close()
	// The slot comes free once the server notices the client left.
	var st *sseStream
	for range 100 {
		if st, r = s.tryStream("/v1/events", reader); st != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st == nil {
		t.Fatalf("a closed stream's slot stayed taken: %d %s", r.Status, r.Body)
	}
	s.openStream("/v1/events", other)
	_, r = s.tryStream("/v1/events", third)
	wantError(t, r, 429, "rate_limited", "")

	_, r = s.tryStream("/v1/events", writer)
	wantError(t, r, 403, "forbidden", "")
	_, r = s.tryStream("/ns/elsewhere/v1/events", "")
	wantError(t, r, 401, "unauthorized", "")

	s.revoke(reader)
	m := st.next()
	if m.Event != "error" || !strings.Contains(m.Data, `"unauthorized"`) {
		t.Fatalf("a revoked key's stream: %+v", m)
	}
	select {
	case <-st.ended:
	case <-time.After(streamWait):
		t.Fatal("a revoked key's stream stayed open")
	}
}

// Opening a stream writes what a keyed read writes (its one audit event);
// idle streams read and write nothing however long they stay open, while
// their keep-alives flow.
func TestEventStreamRows(t *testing.T) {
	s := newTestServer(t, func(c *core.Config) { c.StreamKeepAlive = 20 * time.Millisecond })
	key, principal := s.newKey("agent", "namespace:main", "read")
	s.must(200, "GET", "/v1/counts", key, nil) // the key's first-use observations
	read := s.rowsWritten(func() { s.must(200, "GET", "/v1/counts", key, nil) })
	var streams []*sseStream
	opened := s.rowsWritten(func() {
		for range 5 {
			streams = append(streams, s.openStream("/v1/events", key))
		}
	})
	if read < 1 || opened != 5*read {
		t.Fatalf("a keyed read wrote %d rows, opening 5 streams %d; want 5 × the read's", read, opened)
	}
	// A stream's first keep-alive follows its first look at the trail.
	waitKeepAlives := func(n int64) {
		for _, st := range streams {
			for st.keepAlives.Load() < n {
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	waitKeepAlives(1)
	before, beforeRead := s.Meter.Lifetime()
	waitKeepAlives(4)
	after, afterRead := s.Meter.Lifetime()
	if after != before || afterRead != beforeRead {
		t.Fatalf("idle streams wrote %d rows and read %d", after-before, afterRead-beforeRead)
	}
	var audit core.AuditPage
	s.must(200, "GET", "/v1/admin/audit?principal="+principal+"&action="+core.ActEvents, adminKey, nil).decode(t, &audit)
	if len(audit.Events) != 5 {
		t.Fatalf("%d audit events of streams, want 5 (one per stream)", len(audit.Events))
	}
}

// Every stream ends when the server closes, so a drain is not held up.
func TestEventStreamsEndWithTheServer(t *testing.T) {
	s, stop := serverAt(t, t.TempDir(), tessera.NewManualClock(time.Now()))
	st := s.openStream("/v1/events", adminKey)
	s.Core.Close()
	select {
	case <-st.ended:
	case <-time.After(streamWait):
		t.Fatal("the stream outlived the service")
	}
	stop()
}

// A client following the stream (client.Events) loses nothing across a
// server restart: what committed while the server was down and before
// the client came back arrives after the restart, once each, in order.
func TestEventStreamResumesAcrossARestart(t *testing.T) {
	dir, clock := t.TempDir(), tessera.NewManualClock(time.Now())
	first, stopFirst := serverAt(t, dir, clock)
	// The client's address stays while the server behind it is replaced.
	var backend atomic.Pointer[url.URL]
	setBackend := func(s *testServer) {
		u, err := url.Parse(s.URL)
		if err != nil {
			t.Fatal(err)
		}
		backend.Store(u)
	}
	setBackend(first)
	proxy := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(backend.Load()) },
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable) // a restarting server
		},
	})
	defer proxy.Close()
	c, err := client.New(proxy.URL, client.WithKey(adminKey),
		client.WithRetry(client.RetryPolicy{Attempts: 50, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	titles := make(chan string, 100)
	followed := make(chan error, 1)
	go func() {
		for ev, err := range c.Events(ctx, client.EventFilter{}) {
			if err != nil {
				followed <- err
				return
			}
			titles <- ev.Title
		}
		followed <- nil
	}()
	want := func(title string) {
		t.Helper()
		select {
		case got := <-titles:
			if got != title {
				t.Fatalf("event of %q, want %q", got, title)
			}
		case err := <-followed:
			t.Fatalf("the client stopped following: %v", err)
		case <-time.After(streamWait):
			t.Fatalf("no event of %q came", title)
		}
	}
	for first.Core.OpenStreams() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	first.enqueue("main", adminKey, map[string]any{"title": "one"})
	first.enqueue("main", adminKey, map[string]any{"title": "two"})
	want("one")
	want("two")

	stopFirst()
	second, _ := serverAt(t, dir, clock)
	// Committed before the client is back.
	second.enqueue("main", adminKey, map[string]any{"title": "three"})
	second.enqueue("main", adminKey, map[string]any{"title": "four"})
	setBackend(second)
	want("three")
	want("four")
	second.enqueue("main", adminKey, map[string]any{"title": "five"})
	want("five")
	select {
	case title := <-titles:
		t.Fatalf("an event more: %q", title)
	default:
	}
}

// Across nodes on PostgreSQL: a stream on node B sees what commits on
// node A, woken through the store's notifications, not by polling.
func TestEventStreamCrossesNodes(t *testing.T) {
	url := pgtest.Schema(t)
	clock := tessera.NewManualClock(time.Now())
	onPG := func(o *app.Options) { o.Store = url }
	a, _ := serverWith(t, t.TempDir(), clock, onPG)
	b, _ := serverWith(t, t.TempDir(), clock, onPG)
	st := b.openStream("/v1/events?queue=crossing", adminKey)
	task := a.enqueue("main", adminKey, map[string]any{"title": "made on A", "queue": "crossing"})
	if e := st.event(); e.TaskID != task.ID || e.Kind != core.KindEnqueued {
		t.Fatalf("node B's stream: %+v", e)
	}
	c := a.claim("main", adminKey, "crossing")
	if e := st.event(); e.TaskID != task.ID || e.Kind != core.KindClaimed || e.RunID != c.Lease.RunID {
		t.Fatalf("node B's stream: %+v", e)
	}
}

// On PostgreSQL, writers commit side by side: an event whose id was made
// first may commit after one made later, which a stream has already sent.
// The stream reads back over the store's lag and sends it then, once.
func TestEventStreamSendsALateCommit(t *testing.T) {
	url := pgtest.Schema(t)
	s, _ := serverWith(t, t.TempDir(), tessera.NewManualClock(time.Now()), func(o *app.Options) { o.Store = url })
	st := s.openStream("/v1/events", adminKey)
	made, release, committed := make(chan string), make(chan struct{}), make(chan error, 1)
	go func() {
		committed <- s.DB.Update(context.Background(), func(tx store.Tx) error {
			now := s.Clock.Now()
			ev := &tessera.AuditEvent{ID: ids.New(now), Time: now, Namespace: "main", PrincipalID: "late", Action: core.ActTaskEnqueue,
				Target: "01LATETASK", TaskID: "01LATETASK", Queue: "late", State: tessera.StateReady, Status: 201}
			if err := tx.AuditInsert(context.Background(), ev); err != nil {
				return err
			}
			made <- ev.ID
			<-release // held open while a later event commits
			return nil
		})
	}()
	late := <-made
	s.enqueue("main", adminKey, map[string]any{"title": "made later, committed first"})
	if e := st.event(); e.ID <= late || e.Title != "made later, committed first" {
		t.Fatalf("first event %+v; the late one is %s", e, late)
	}
	close(release)
	if err := <-committed; err != nil {
		t.Fatal(err)
	}
	s.enqueue("main", adminKey, map[string]any{"title": "wakes the stream"})
	if e := st.event(); e.ID != late || e.TaskID != "01LATETASK" {
		t.Fatalf("after the late commit: %+v, want event %s", e, late)
	}
	if e := st.event(); e.Title != "wakes the stream" {
		t.Fatalf("then: %+v", e)
	}
	st.quiet()
}
