package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/client"
	"github.com/tessera-dev/tessera/internal/testserver"
)

// routeLog records the method and path of every request a server sees.
type routeLog struct {
	mu   sync.Mutex
	seen []string
}

func (l *routeLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		// A namespace's copy of a route is the route.
		path := regexp.MustCompile(`^/ns/[^/]+/v1/`).ReplaceAllString(r.URL.Path, "/v1/")
		l.seen = append(l.seen, r.Method+" "+path)
		l.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func newClient(t *testing.T, url, key string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(url, append([]client.Option{client.WithKey(key)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ok returns v, or stops the test (by panicking, which go test reports
// with the stack) when err is set: the calls read as a walk-through.
func ok[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// Every route of the HTTP API has a client method: the test calls them
// all against a real server, checks what each answers, and then holds the
// requests the server saw to the routes of its own API description, so a
// route added to the server without a client method fails here.
func TestEveryRouteAgainstARealServer(t *testing.T) {
	var log routeLog
	srv := testserver.Start(t, testserver.Options{Wrap: log.wrap})
	ctx := context.Background()
	admin := newClient(t, srv.URL, testserver.AdminKey)

	me := ok(admin.Me(ctx))
	if !slices.Contains(me.Scopes, "admin") {
		t.Fatalf("admin's scopes: %v", me.Scopes)
	}
	task := ok(admin.Enqueue(ctx, client.EnqueueRequest{Title: "summarize", Payload: map[string]string{"doc": "r-17"}, Public: true, Labels: []string{"demo"}}))
	if task.State != client.StateReady || string(task.Payload) != `{"doc":"r-17"}` {
		t.Fatalf("enqueued: %+v", task)
	}
	page := ok(admin.ListTasks(ctx, client.TaskFilter{Label: "demo", Limit: 10}))
	if len(page.Tasks) != 1 || page.Tasks[0].ID != task.ID {
		t.Fatalf("listed: %+v", page)
	}
	child := ok(admin.Enqueue(ctx, client.EnqueueRequest{Title: "after it", After: []string{task.ID}}))
	if child.State != client.StateWaiting || child.Dependency == nil || child.Dependency.WaitingOn != 1 {
		t.Fatalf("a task enqueued after another: %+v", child)
	}
	if deps := ok(admin.Dependents(ctx, task.ID, client.Page{})); len(deps.Tasks) != 1 || deps.Tasks[0].ID != child.ID {
		t.Fatalf("dependents: %+v", deps)
	}
	if got := ok(admin.PauseTask(ctx, task.ID)); got.State != client.StatePaused {
		t.Fatalf("paused: %s", got.State)
	}
	if got := ok(admin.ResumeTask(ctx, task.ID)); got.State != client.StateReady {
		t.Fatalf("resumed: %s", got.State)
	}
	counts := ok(admin.Counts(ctx))
	if counts["default"]["ready"] != 1 {
		t.Fatalf("counts: %v", counts)
	}

	cl, _, err := admin.Claim(ctx, client.ClaimRequest{LeaseSeconds: 60})
	if err != nil || cl == nil || cl.Task.ID != task.ID || cl.Lease.Token == "" {
		t.Fatalf("claim: %+v, %v", cl, err)
	}
	none, empty, err := admin.Claim(ctx, client.ClaimRequest{})
	if err != nil || none != nil || empty == nil || !reflect.DeepEqual(*empty, client.Empty{RetryAfter: 5 * time.Second}) {
		t.Fatalf("empty claim: %+v, %+v, %v", none, empty, err)
	}
	hb := ok(admin.Heartbeat(ctx, task.ID, client.HeartbeatRequest{LeaseToken: cl.Lease.Token, Progress: map[string]int{"pct": 50}}))
	if hb.State != client.StateLeased || hb.CancelRequested || hb.ExpiresAt == nil {
		t.Fatalf("heartbeat: %+v", hb)
	}
	note := ok(admin.AddNote(ctx, task.ID, "mind the footnotes"))
	evs := ok(admin.ClaimEvents(ctx, task.ID, 0, 0))
	if len(evs.Events) != 1 || evs.Events[0].Seq != note.Seq || evs.Events[0].Body != "mind the footnotes" {
		t.Fatalf("claim events: %+v", evs)
	}

	rec := ok(admin.PutRecord(ctx, "reports", "r-17", client.PutRecordRequest{Value: map[string]string{"summary": "v1"}, LeaseToken: cl.Lease.Token}))
	if rec.Version != 1 || rec.RunID != cl.Lease.RunID {
		t.Fatalf("record v1: %+v", rec)
	}
	one := int64(1)
	ok(admin.PutRecord(ctx, "reports", "r-17", client.PutRecordRequest{Value: "v2", IfVersion: &one}))
	if _, err := admin.PutRecord(ctx, "reports", "r-17", client.PutRecordRequest{Value: "v3", IfVersion: &one}); !client.IsVersionConflict(err) {
		t.Fatalf("stale if_version: %v", err)
	}
	if got := ok(admin.GetRecord(ctx, "reports", "r-17", 1)); string(got.Value) != `{"summary":"v1"}` || got.RunID != cl.Lease.RunID {
		t.Fatalf("record v1 read: %+v", got)
	}
	if got := ok(admin.GetRecord(ctx, "reports", "r-17", 0)); got.Version != 2 || string(got.Value) != `"v2"` {
		t.Fatalf("record head: %+v", got)
	}
	if vs := ok(admin.RecordVersions(ctx, "reports", "r-17", client.Page{})); len(vs.Versions) != 2 || vs.Versions[0].Version != 2 {
		t.Fatalf("versions: %+v", vs)
	}
	if rs := ok(admin.ListRecords(ctx, "reports", "r-", client.Page{Limit: 5})); len(rs.Records) != 1 || rs.Records[0].Key != "r-17" {
		t.Fatalf("records: %+v", rs)
	}
	if b := ok(admin.PutBucket(ctx, "reports", true)); !b.Public {
		t.Fatalf("bucket: %+v", b)
	}
	if bs := ok(admin.ListBuckets(ctx, client.Page{})); len(bs.Buckets) != 1 || bs.Buckets[0].Name != "reports" {
		t.Fatalf("buckets: %+v", bs)
	}

	data := []byte("the whole report")
	ref := ok(admin.PutBlob(ctx, data, "text/plain", cl.Lease.Token))
	if again := ok(admin.PutBlob(ctx, data, "text/plain", "")); again != ref {
		t.Fatalf("the same bytes again: %s, want %s", again, ref)
	}
	var got bytes.Buffer
	if n, err := admin.GetBlob(ctx, ref, &got); err != nil || n != int64(len(data)) || got.String() != string(data) {
		t.Fatalf("blob bytes: %d %q %v", n, got.String(), err)
	}
	if meta := ok(admin.BlobMeta(ctx, ref)); meta.Size != int64(len(data)) || meta.RunID != cl.Lease.RunID {
		t.Fatalf("blob meta: %+v", meta)
	}

	done := ok(admin.Submit(ctx, task.ID, client.SubmitRequest{LeaseToken: cl.Lease.Token, Outcome: client.OutcomeSucceeded, Result: map[string]string{"blob": ref}}))
	if done.State != client.StateSucceeded {
		t.Fatalf("submitted: %+v", done)
	}
	if full := ok(admin.GetTask(ctx, task.ID)); len(full.Runs) != 1 || full.Runs[0].Outcome != client.OutcomeSucceeded {
		t.Fatalf("task with runs: %+v", full)
	}

	// A second task to cancel and retry, a third to release and then park
	// on a gate.
	other := ok(admin.Enqueue(ctx, client.EnqueueRequest{Title: "second"}))
	if got := ok(admin.CancelTask(ctx, other.ID)); got.State != client.StateCanceled {
		t.Fatalf("canceled: %s", got.State)
	}
	if got := ok(admin.RetryTask(ctx, other.ID)); got.State != client.StateReady {
		t.Fatalf("retried: %s", got.State)
	}
	cl2 := ok(admin.WaitClaim(ctx, client.ClaimRequest{}))
	if got := ok(admin.Release(ctx, cl2.Task.ID, cl2.Lease.Token)); got.State != client.StateReady || got.Attempts != 0 {
		t.Fatalf("released: %+v", got)
	}
	cl3 := ok(admin.WaitClaim(ctx, client.ClaimRequest{}))
	gated := ok(admin.OpenGates(ctx, cl3.Task.ID, client.GateRequest{LeaseToken: cl3.Lease.Token, Gates: []client.GateSpec{{Key: "go", Message: "Go ahead?"}}}))
	if gated.State != client.StateGated || gated.Attempts != 0 || gated.Lease != nil {
		t.Fatalf("parked on a gate: %+v", gated)
	}
	if got := ok(admin.AnswerGate(ctx, cl3.Task.ID, "go", client.GateAnswerRequest{Action: client.GateAccept})); got.State != client.StateReady ||
		len(got.Gates) != 1 || got.Gates[0].Kind != client.GateApproval || got.Gates[0].Answer == nil || got.Gates[0].Answer.Action != client.GateAccept {
		t.Fatalf("its gate answered: %+v", got)
	}

	// A batch claim and a batch submit, in a namespace of their own: each
	// item fenced by its own token, a stale one refused alone.
	bns := admin.InNamespace("batches")
	for _, title := range []string{"b1", "b2"} {
		ok(bns.Enqueue(ctx, client.EnqueueRequest{Title: title}))
	}
	claims, _, err := bns.ClaimN(ctx, client.ClaimRequest{LeaseSeconds: 60}, 5)
	if err != nil || len(claims) != 2 || claims[0].Task.Title != "b1" || claims[1].Task.Title != "b2" || claims[0].Lease.Token == claims[1].Lease.Token {
		t.Fatalf("batch claim: %+v, %v", claims, err)
	}
	if none, empty, err := bns.ClaimN(ctx, client.ClaimRequest{}, 5); err != nil || none != nil || empty == nil || empty.RetryAfter != 5*time.Second {
		t.Fatalf("empty batch claim: %+v, %+v, %v", none, empty, err)
	}
	results := ok(bns.SubmitBatch(ctx, client.SubmitBatchRequest{Items: []client.SubmitItem{
		{TaskID: claims[0].Task.ID, SubmitRequest: client.SubmitRequest{LeaseToken: claims[0].Lease.Token, Outcome: client.OutcomeSucceeded}},
		{TaskID: claims[1].Task.ID, SubmitRequest: client.SubmitRequest{LeaseToken: claims[0].Lease.Token, Outcome: client.OutcomeSucceeded}},
	}}))
	if len(results) != 2 || results[0].Err != nil || results[0].Task.State != client.StateSucceeded ||
		!client.IsLeaseLost(results[1].Err) || !client.IsConflict(results[1].Err) || results[1].Task != nil {
		t.Fatalf("batch submit with a stale token in it: %+v", results)
	}

	// The console's reads and actions, and the live stream.
	if tr := ok(admin.TaskTrail(ctx, task.ID)); len(tr.Events) == 0 || tr.Events[0].Kind != client.KindEnqueued {
		t.Fatalf("trail: %+v", tr)
	}
	if q := ok(admin.PauseQueue(ctx, "default")); !q.Paused {
		t.Fatalf("paused: %+v", q)
	}
	if qs := ok(admin.ListQueues(ctx)); len(qs.Queues) != 1 || !qs.Queues[0].Paused || qs.Queues[0].Counts["succeeded"] != 1 {
		t.Fatalf("queues: %+v", qs)
	}
	if q := ok(admin.ResumeQueue(ctx, "default")); q.Paused {
		t.Fatalf("resumed: %+v", q)
	}
	counted := ok(admin.BulkChange(ctx, client.BulkRequest{Action: "cancel", DryRun: true, Selection: client.Selection{Title: "SECOND"}}))
	if bulk := ok(admin.BulkChange(ctx, client.BulkRequest{Action: "cancel", Expect: &counted.Count, Selection: client.Selection{Title: "second"}})); counted.Count != 1 || len(bulk.Changed) != 1 {
		t.Fatalf("bulk cancel of %d: %+v", counted.Count, bulk)
	}
	if p := ok(admin.PurgeQueue(ctx, "default", "canceled")); p.Purged != 1 || p.More {
		t.Fatalf("purge: %+v", p)
	}
	stream, stop := context.WithCancel(ctx)
	defer stop()
	for ev, err := range admin.Events(stream, client.EventFilter{After: task.ID}) {
		if err != nil || ev.Namespace != "main" {
			t.Fatalf("event: %+v, %v", ev, err)
		}
		stop()
	}

	// Administration.
	pr := ok(admin.CreatePrincipal(ctx, client.PrincipalRequest{Kind: "agent", DisplayName: "worker-1"}))
	name := "worker-one"
	if p := ok(admin.UpdatePrincipal(ctx, pr.ID, client.PrincipalPatch{DisplayName: &name})); p.DisplayName != name {
		t.Fatalf("patched: %+v", p)
	}
	if ps := ok(admin.ListPrincipals(ctx, client.Page{Limit: 200})); !slices.ContainsFunc(ps.Principals, func(p client.Principal) bool { return p.ID == pr.ID }) {
		t.Fatalf("principals: %+v", ps)
	}
	key := ok(admin.CreateKey(ctx, client.KeyRequest{PrincipalID: pr.ID, Scopes: []string{"namespace:main", "read"}}))
	if !strings.HasPrefix(key.Secret, "tsk_") || key.PrincipalID != pr.ID {
		t.Fatalf("new key: %+v", key)
	}
	worker := newClient(t, srv.URL, key.Secret)
	if _, err := worker.Enqueue(ctx, client.EnqueueRequest{Title: "not allowed"}); !client.IsForbidden(err) {
		t.Fatalf("enqueue without the scope: %v", err)
	}
	if ks := ok(admin.ListKeys(ctx, client.Page{})); !slices.ContainsFunc(ks.Keys, func(k client.Key) bool { return k.ID == key.ID }) {
		t.Fatalf("keys: %+v", ks)
	}
	if err := admin.RevokeKey(ctx, key.ID); err != nil {
		t.Fatal(err)
	}
	if nss := ok(admin.ListNamespaces(ctx, client.Page{})); !slices.ContainsFunc(nss.Namespaces, func(n client.Namespace) bool { return n.Name == "main" }) {
		t.Fatalf("namespaces: %+v", nss)
	}
	if st := ok(admin.NamespaceSettings(ctx, "main")); st.RawPolicy != "private" {
		t.Fatalf("settings: %+v", st)
	}
	if st := ok(admin.SetNamespaceSettings(ctx, "main", "namespace")); st.RawPolicy != "namespace" {
		t.Fatalf("settings set: %+v", st)
	}
	if tot := ok(admin.Storage(ctx)); tot.RowsWritten == 0 {
		t.Fatalf("storage: %+v", tot)
	}
	if tot := ok(admin.SetAllowance(ctx, client.Allowance{RowsWrittenPerDay: 1_000_000})); tot.Allowance.RowsWrittenPerDay != 1_000_000 {
		t.Fatalf("allowance: %+v", tot)
	}
	if a := ok(admin.MyAudit(ctx, client.AuditFilter{Action: "task.enqueue"})); len(a.Events) != 5 { // three in main, two in batches
		t.Fatalf("my enqueue events: %+v", a.Events)
	}
	if a := ok(admin.AdminAudit(ctx, client.AuditFilter{Principal: pr.ID, Outcome: "forbidden"})); len(a.Counters) != 1 || a.Counters[0].Count != 1 {
		t.Fatalf("the worker's forbidden counter: %+v", a.Counters)
	}

	// Public state and discovery.
	if h := ok(admin.Healthz(ctx)); h.Status != "ok" {
		t.Fatalf("healthz: %+v", h)
	}
	if h := ok(admin.Health(ctx)); h.Totals.Counts["succeeded"] != 1 {
		t.Fatalf("health: %+v", h.Totals)
	}
	board := ok(admin.Board(ctx))
	if len(board.Tasks["succeeded"]) != 1 || board.Tasks["succeeded"][0].ID != task.ID || len(board.Buckets) != 1 {
		t.Fatalf("board: %+v", board)
	}
	if act := ok(admin.Activity(ctx, client.Page{})); len(act.Events) == 0 {
		t.Fatalf("activity: %+v", act)
	}
	for _, doc := range []string{"/", "/connect", "/connect.json", "/llms.txt", "/llms-full.txt", "/robots.txt", "/favicon.svg", "/.well-known/agent-card.json", "/metrics",
		"/console", "/console/app.js"} {
		if b := ok(admin.Document(ctx, doc)); len(b) == 0 {
			t.Fatalf("%s: empty", doc)
		}
	}
	spec := ok(admin.Document(ctx, "/v1/openapi.json"))

	// A batch is all or none.
	batch := ok(admin.EnqueueBatch(ctx, client.EnqueueBatchRequest{Tasks: []client.EnqueueRequest{
		{Title: "batched 1", Queue: "batch"}, {Title: "batched 2", Queue: "batch", Payload: map[string]int{"n": 2}}}}))
	if len(batch) != 2 || batch[0].Title != "batched 1" || string(batch[1].Payload) != `{"n":2}` || batch[1].Namespace != "main" {
		t.Fatalf("batch: %+v", batch)
	}
	_, err = admin.EnqueueBatch(ctx, client.EnqueueBatchRequest{Tasks: []client.EnqueueRequest{{Title: "fine"}, {Queue: "untitled"}}})
	var bad *client.Error
	if !asError(err, &bad) || bad.Status != 400 || bad.Details.Field != "tasks[1].title" {
		t.Fatalf("a batch with a bad task: %v", err)
	}
	if c := ok(admin.Counts(ctx)); c["batch"]["ready"] != 2 || c["untitled"] != nil {
		t.Fatalf("counts after the batches: %v", c)
	}

	// The same methods reach another namespace under /ns/{ns}.
	farm := admin.InNamespace("build-farm")
	ok(farm.Enqueue(ctx, client.EnqueueRequest{Title: "in the farm"}))
	if c := ok(farm.Counts(ctx)); c["default"]["ready"] != 1 {
		t.Fatalf("farm counts: %v", c)
	}
	ok(farm.Healthz(ctx))
	// A demo session needs no key, and its key works at once.
	sess := ok(newClient(t, srv.URL, "").StartSession(ctx))
	demo, err := client.New(srv.URL, client.WithKey(sess.Key), client.WithNamespace(sess.Namespace))
	if err != nil {
		t.Fatal(err)
	}
	if c := ok(demo.Counts(ctx)); c["practice"]["ready"] != 3 {
		t.Fatalf("a session's practice tasks: %v", c)
	}
	if p := ok(admin.PurgeNamespace(ctx, "build-farm")); p.Namespace != "build-farm" {
		t.Fatalf("purge: %+v", p)
	}
	if c := ok(farm.Counts(ctx)); len(c) != 0 {
		t.Fatalf("counts after the purge: %v", c)
	}

	// A queue's fleet: its settings, a group's, and the view of both
	// (fleet_test.go has what they do to claims).
	if qs := ok(admin.SetQueueSettings(ctx, "batch", client.QueueSettings{GroupMaxRunning: 2, Rate: &client.Rate{PerSecond: 10}})); qs.Queue != "batch" || qs.GroupMaxRunning != 2 || qs.Rate == nil || qs.Rate.Burst != 10 {
		t.Fatalf("queue settings: %+v", qs)
	}
	three := 3
	if g := ok(admin.SetGroupSettings(ctx, "batch", client.GroupSettings{Group: "tenant-a", MaxRunning: &three})); g.Group != "tenant-a" || g.MaxRunning == nil || *g.MaxRunning != 3 || g.Running != 0 {
		t.Fatalf("group settings: %+v", g)
	}
	if f := ok(admin.QueueFleet(ctx, "batch")); f.GroupMaxRunning != 2 || len(f.Groups) != 1 || f.Groups[0].Group != "tenant-a" || f.Groups[0].LastGrantedAt != nil || len(f.Lanes) != 1 || f.Lanes[0].Ready != 2 {
		t.Fatalf("fleet: %+v", f)
	}

	log.mu.Lock()
	seen := slices.Clone(log.seen)
	log.mu.Unlock()
	for _, route := range apiRoutes(t, spec) {
		re := regexp.MustCompile("^" + regexp.MustCompile(`\\\{[^}]+\\\}`).ReplaceAllString(regexp.QuoteMeta(route), `[^/]+`) + "$")
		if !slices.ContainsFunc(seen, re.MatchString) {
			t.Errorf("no client call reached %s", route)
		}
	}
}

// apiRoutes lists "METHOD /path" of every route the API description
// names outside /ns/ (the namespaced copies are the same routes).
func apiRoutes(t *testing.T, spec []byte) []string {
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(spec, &doc); err != nil {
		t.Fatal(err)
	}
	var routes []string
	for path, ops := range doc.Paths {
		// The namespaced copies are the same routes; /mcp speaks MCP, not
		// this API (internal/mcp's tests drive it with MCP clients).
		if strings.HasPrefix(path, "/ns/") || path == "/mcp" {
			continue
		}
		for method := range ops {
			routes = append(routes, strings.ToUpper(method)+" "+path)
		}
	}
	if len(routes) < 40 {
		t.Fatalf("the API description names only %d routes", len(routes))
	}
	return routes
}

// A failure is one typed error with the status, code, message and details.
func TestErrorsAreTyped(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	ctx := context.Background()
	admin := newClient(t, srv.URL, testserver.AdminKey)

	_, err := admin.GetTask(ctx, "01NOSUCHTASK")
	var e *client.Error
	if !errors.As(err, &e) || e.Status != 404 || e.Code != client.CodeNotFound || e.Message == "" || !client.IsNotFound(err) {
		t.Fatalf("missing task: %#v", err)
	}
	_, err = admin.Enqueue(ctx, client.EnqueueRequest{Title: ""})
	if !errors.As(err, &e) || e.Status != 400 || e.Details.Field != "title" {
		t.Fatalf("no title: %#v", err)
	}
	_, err = admin.Submit(ctx, "01NOSUCHTASK", client.SubmitRequest{LeaseToken: "x.y", Outcome: client.OutcomeSucceeded})
	if !client.IsLeaseLost(err) && !client.IsNotFound(err) {
		t.Fatalf("submit without a lease: %v", err)
	}
	stranger := newClient(t, srv.URL, "tsk_nobody_abcdefghijklmnopqrstuvwxyz0123")
	if _, err := stranger.Me(ctx); !client.IsUnauthorized(err) {
		t.Fatalf("unknown key: %v", err)
	}
	if _, err := client.New("ftp://example"); err == nil {
		t.Fatal("a base URL that is not http(s) was accepted")
	}
}

func asError(err error, e **client.Error) bool { return errors.As(err, e) }
