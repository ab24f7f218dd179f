package httpapi_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/app"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// Empty claims, long-polls, claim events and admission (SPEC §6).

// The Retry-After of empty claims doubles per key and queue: 5, 10, 20,
// 40, then 60 s; an enqueue to the queue or a lease granted to the key
// starts it over; every key has its own.
func TestClaimRetryAfterSequence(t *testing.T) {
	s := newTestServer(t)
	producer, _ := s.newKey("service", "namespace:main", "enqueue", "read")
	k1, _ := s.newKey("agent", "namespace:main", "claim")
	k2, _ := s.newKey("agent", "namespace:main", "claim")

	seq := func(key, queue string, want ...string) {
		t.Helper()
		for i, w := range want {
			if got := s.emptyClaim("main", key, queue); got != w {
				t.Fatalf("empty claim %d on %s: Retry-After %q, want %q", i+1, queue, got, w)
			}
		}
	}
	seq(k1, "q", "5", "10", "20", "40", "60", "60")

	// Another key starts at 5; the first key's hint is untouched by it.
	seq(k2, "q", "5", "10")
	seq(k1, "q", "60")
	// Another queue of the same key has its own sequence.
	seq(k1, "other", "5")
	// An enqueue to another queue changes nothing for q.
	s.enqueue("main", producer, map[string]any{"queue": "elsewhere"})
	seq(k1, "q", "60")

	// An enqueue to q starts every key over on q, even one that finds q
	// empty again (the task is not ready yet).
	s.enqueue("main", producer, map[string]any{"queue": "q", "run_at": s.Clock.Now().Add(time.Hour)})
	seq(k1, "q", "5", "10", "20")
	seq(k2, "q", "5")

	// A lease granted to k1 (on another queue) starts k1 over on q, not k2.
	s.enqueue("main", producer, map[string]any{"queue": "work"})
	s.claim("main", k1, "work")
	seq(k1, "q", "5", "10")
	seq(k2, "q", "10")

	// Long-polls that run out of time are empty claims too.
	r := s.must(204, "POST", "/v1/claims", k1, map[string]any{"queue": "q", "wait_seconds": 1})
	if got := r.Header.Get("Retry-After"); got != "20" || len(r.Body) != 0 {
		t.Fatalf("timed-out long-poll: Retry-After %q body %q", got, r.Body)
	}
}

// A long-poll claim wakes at once on an enqueue to its queue.
func TestClaimLongPollWakesOnEnqueue(t *testing.T) {
	s := newTestServer(t)
	producer, _ := s.newKey("service", "namespace:main", "enqueue", "read")
	worker, workerID := s.newKey("agent", "namespace:main", "claim")

	ch := s.async(10*time.Second, "POST", "/v1/claims", worker, map[string]any{"queue": "lp", "wait_seconds": 20})
	parked()
	// An enqueue elsewhere does not satisfy it.
	s.enqueue("main", producer, map[string]any{"queue": "not-lp"})
	task := s.enqueue("main", producer, map[string]any{"queue": "lp"})
	r := await(t, ch)
	if r.Status != 200 {
		t.Fatalf("long-poll: %d %s", r.Status, r.Body)
	}
	var c claimed
	r.decode(t, &c)
	if c.Task.ID != task.ID || c.Lease.Token == "" || c.Lease.Holder != workerID {
		t.Fatalf("long-poll got %+v", c)
	}
}

// It also wakes on a release and on a resume in its queue.
func TestClaimLongPollWakesOnReleaseAndResume(t *testing.T) {
	s := newTestServer(t)
	producer, _ := s.newKey("service", "namespace:main", "enqueue", "read")
	holder, _ := s.newKey("agent", "namespace:main", "claim")
	waiter, waiterID := s.newKey("agent", "namespace:main", "claim")

	task := s.enqueue("main", producer, map[string]any{"queue": "lp"})
	held := s.claim("main", holder, "lp")
	ch := s.async(10*time.Second, "POST", "/v1/claims", waiter, map[string]any{"queue": "lp", "wait_seconds": 20})
	parked()
	s.must(200, "POST", "/v1/claims/"+task.ID+"/release", holder, map[string]any{"lease_token": held.Lease.Token})
	r := await(t, ch)
	var c claimed
	if r.Status != 200 {
		t.Fatalf("after release: %d %s", r.Status, r.Body)
	}
	r.decode(t, &c)
	if c.Task.ID != task.ID || c.Lease.Holder != waiterID {
		t.Fatalf("after release got %+v", c)
	}
	s.submit("main", waiter, c, "succeeded")

	paused := s.enqueue("main", producer, map[string]any{"queue": "lp"})
	s.must(200, "POST", "/v1/tasks/"+paused.ID+"/pause", producer, nil)
	ch = s.async(10*time.Second, "POST", "/v1/claims", waiter, map[string]any{"queue": "lp", "wait_seconds": 20})
	parked()
	s.must(200, "POST", "/v1/tasks/"+paused.ID+"/resume", producer, nil)
	r = await(t, ch)
	if r.Status != 200 {
		t.Fatalf("after resume: %d %s", r.Status, r.Body)
	}
	r.decode(t, &c)
	if c.Task.ID != paused.ID {
		t.Fatalf("after resume got %+v", c)
	}
}

// A key revoked while its claim waits gets 401, and the task that woke it
// stays ready for others.
func TestClaimLongPollRevokedWhileWaiting(t *testing.T) {
	s := newTestServer(t)
	producer, _ := s.newKey("service", "namespace:main", "enqueue", "read")
	worker, _ := s.newKey("agent", "namespace:main", "claim")
	other, _ := s.newKey("agent", "namespace:main", "claim")

	ch := s.async(10*time.Second, "POST", "/v1/claims", worker, map[string]any{"queue": "lp", "wait_seconds": 20})
	parked()
	s.revoke(worker)
	task := s.enqueue("main", producer, map[string]any{"queue": "lp"})
	r := await(t, ch)
	wantError(t, r, 401, "unauthorized", "")
	if r.Header.Get("WWW-Authenticate") == "" {
		t.Fatalf("401 without WWW-Authenticate")
	}
	got := s.task("main", producer, task.ID)
	if got.State != tessera.StateReady || got.Attempts != 0 || len(got.Runs) != 0 {
		t.Fatalf("task after the revoked claim: state %s attempts %d runs %d", got.State, got.Attempts, len(got.Runs))
	}
	if c := s.claim("main", other, "lp"); c.Task.ID != task.ID {
		t.Fatalf("another key claimed %s", c.Task.ID)
	}
}

// A key whose grant went away while it waited (here: expiry) is refused.
func TestClaimLongPollExpiredWhileWaiting(t *testing.T) {
	s := newTestServer(t)
	producer, _ := s.newKey("service", "namespace:main", "enqueue", "read")
	_, pid := s.newKey("agent", "namespace:main", "claim")
	var k struct {
		Key string `json:"key"`
	}
	s.must(201, "POST", "/v1/admin/keys", adminKey, map[string]any{
		"principal_id": pid, "scopes": []string{"namespace:main", "claim"}, "expires_at": s.Clock.Now().Add(10 * time.Second),
	}).decode(t, &k)

	ch := s.async(10*time.Second, "POST", "/v1/claims", k.Key, map[string]any{"queue": "lp", "wait_seconds": 20})
	parked()
	s.Clock.Advance(time.Minute)
	task := s.enqueue("main", producer, map[string]any{"queue": "lp"})
	wantError(t, await(t, ch), 401, "unauthorized", "")
	if got := s.task("main", producer, task.ID); got.State != tessera.StateReady || got.Attempts != 0 {
		t.Fatalf("task after the expired claim: %s attempts %d", got.State, got.Attempts)
	}
}

// claimEvents is the claim-events answer.
type claimEvents struct {
	Events          []tessera.TaskEvent `json:"events"`
	NextSince       int64               `json:"next_since"`
	State           string              `json:"state"`
	CancelRequested bool                `json:"cancel_requested"`
	Lease           *tessera.Lease      `json:"lease"`
}

func TestClaimEvents(t *testing.T) {
	s := newTestServer(t)
	producer, producerID := s.newKey("service", "namespace:main", "enqueue", "read")
	worker, workerID := s.newKey("agent", "namespace:main", "claim")
	stranger, _ := s.newKey("agent", "namespace:main", "claim", "read")
	task := s.enqueue("main", producer, map[string]any{})
	c := s.claim("main", worker, "default")
	events := "/v1/claims/" + task.ID + "/events"

	// Nothing yet: wait=0 answers at once, empty.
	var ev claimEvents
	s.must(200, "GET", events+"?since=0", worker, nil).decode(t, &ev)
	if len(ev.Events) != 0 || ev.NextSince != 0 || ev.State != tessera.StateLeased || ev.Lease == nil || ev.Lease.Holder != workerID || ev.Lease.Token != "" {
		t.Fatalf("no events yet: %+v", ev)
	}

	// A note wakes the long-poll and is delivered.
	ch := s.async(10*time.Second, "GET", events+"?since=0&wait=20", worker, nil)
	parked()
	var note tessera.TaskEvent
	s.must(201, "POST", "/v1/tasks/"+task.ID+"/notes", producer, map[string]any{"body": "use the new data"}).decode(t, &note)
	r := await(t, ch)
	if r.Status != 200 {
		t.Fatalf("events: %d %s", r.Status, r.Body)
	}
	r.decode(t, &ev)
	if len(ev.Events) != 1 || ev.Events[0].Kind != tessera.EventNote || ev.Events[0].Body != "use the new data" ||
		ev.Events[0].By != producerID || ev.Events[0].Seq != note.Seq || ev.NextSince != note.Seq || ev.NextSince < 1 {
		t.Fatalf("note event: %+v (note %+v)", ev, note)
	}
	since := ev.NextSince

	// Already-read events are not repeated.
	s.must(200, "GET", events+"?since="+strconv.FormatInt(since, 10), worker, nil).decode(t, &ev)
	if len(ev.Events) != 0 || ev.NextSince != since {
		t.Fatalf("after next_since: %+v", ev)
	}

	// The holder may write a note too; a cancel request is delivered as an
	// event with cancel_requested set.
	s.must(201, "POST", "/v1/tasks/"+task.ID+"/notes", worker, map[string]any{"body": "ack"})
	ch = s.async(10*time.Second, "GET", events+"?since="+strconv.FormatInt(since+1, 10)+"&wait=20", worker, nil)
	parked()
	s.must(200, "POST", "/v1/tasks/"+task.ID+"/cancel", producer, nil)
	r = await(t, ch)
	if r.Status != 200 {
		t.Fatalf("events: %d %s", r.Status, r.Body)
	}
	r.decode(t, &ev)
	if len(ev.Events) != 1 || ev.Events[0].Kind != tessera.EventCancelRequested || !ev.CancelRequested || ev.NextSince != since+2 {
		t.Fatalf("cancel event: %+v", ev)
	}

	// Everything, from the start, in order.
	s.must(200, "GET", events+"?since=0", worker, nil).decode(t, &ev)
	if len(ev.Events) != 3 || ev.Events[0].Kind != "note" || ev.Events[1].Kind != "note" || ev.Events[1].By != workerID || ev.Events[2].Kind != "cancel_requested" {
		t.Fatalf("all events: %+v", ev)
	}

	// Only the holder (or an admin) reads them; a stranger may not write
	// notes without enqueue either.
	wantError(t, s.do("GET", events+"?since=0", stranger, nil), 403, "forbidden", "")
	wantError(t, s.do("GET", events+"?since=0", producer, nil), 403, "forbidden", "") // no claim scope
	wantError(t, s.do("POST", "/v1/tasks/"+task.ID+"/notes", stranger, map[string]any{"body": "hi"}), 403, "forbidden", "")
	s.must(200, "GET", events+"?since=0", adminKey, nil)

	// After the lease ended the last holder may still read how it ended.
	var hb core.Heartbeat
	s.must(200, "POST", "/v1/claims/"+task.ID+"/heartbeat", worker, map[string]any{"lease_token": c.Lease.Token}).decode(t, &hb)
	s.must(200, "GET", events+"?since=0", worker, nil).decode(t, &ev)
	if ev.State != tessera.StateCanceled || ev.Lease != nil {
		t.Fatalf("after the lease ended: %+v", ev)
	}
	wantError(t, s.do("GET", events+"?since=0", stranger, nil), 403, "forbidden", "")
}

// A lapse is delivered as an event too.
func TestClaimEventsLapse(t *testing.T) {
	s := newTestServer(t)
	worker, _ := s.newKey("agent", "namespace:main", "claim")
	task := s.enqueue("main", adminKey, map[string]any{})
	var c claimed
	s.must(200, "POST", "/v1/claims", worker, map[string]any{"lease_seconds": 10}).decode(t, &c)
	s.Clock.Advance(11 * time.Second)
	wantError(t, s.do("POST", "/v1/claims/"+task.ID+"/heartbeat", worker, map[string]any{"lease_token": c.Lease.Token}), 409, "lease_lost", "")
	var ev claimEvents
	s.must(200, "GET", "/v1/claims/"+task.ID+"/events?since=0", worker, nil).decode(t, &ev)
	if len(ev.Events) != 1 || ev.Events[0].Kind != tessera.EventLeaseEnded || ev.Lease != nil || ev.State != tessera.StateScheduled {
		t.Fatalf("lapse event: %+v", ev)
	}
}

// Claims over a key's admitted rate answer 429 rate_limited with a
// Retry-After.
func TestClaimAdmissionRateLimited(t *testing.T) {
	s := newTestServer(t, func(c *core.Config) {
		// A token every 5 s: the third claim is refused however slowly
		// this machine runs the first two.
		c.ClaimRate, c.ClaimBurst, c.AdmissionWait = 0.2, 2, 10*time.Millisecond
	})
	worker, _ := s.newKey("agent", "namespace:main", "claim")
	other, _ := s.newKey("agent", "namespace:main", "claim")
	task := s.enqueue("main", adminKey, map[string]any{})

	s.emptyClaim("main", worker, "empty")
	s.emptyClaim("main", worker, "empty")
	r := s.do("POST", "/v1/claims", worker, map[string]any{})
	e := wantError(t, r, 429, "rate_limited", "")
	ra, err := strconv.Atoi(r.Header.Get("Retry-After"))
	if err != nil || ra < 1 {
		t.Fatalf("Retry-After %q", r.Header.Get("Retry-After"))
	}
	if d, _ := e.Error.Details["retry_after"].(float64); int(d) != ra {
		t.Fatalf("details.retry_after %v, header %d", e.Error.Details["retry_after"], ra)
	}
	// The refused claim took nothing.
	if got := s.task("main", adminKey, task.ID); got.State != tessera.StateReady {
		t.Fatalf("rate-limited claim took the task: %s", got.State)
	}
	// The budget is per key.
	if c := s.claim("main", other, "default"); c.Task.ID != task.ID {
		t.Fatalf("other key claimed %s", c.Task.ID)
	}
}

// With a concurrency of 1, a second claim while a long-poll holds the slot
// is refused once the admission wait runs out.
func TestClaimAdmissionConcurrency(t *testing.T) {
	s := newTestServer(t, func(c *core.Config) {
		c.ClaimConcurrency, c.AdmissionWait = 1, 50*time.Millisecond
	})
	worker, _ := s.newKey("agent", "namespace:main", "claim")
	ch := s.async(10*time.Second, "POST", "/v1/claims", worker, map[string]any{"queue": "lp", "wait_seconds": 20})
	// Until the long-poll holds the slot a claim may still get in (204);
	// once it does, claims are refused. Give it up to 5 s to get there.
	var r *response
	for deadline := time.Now().Add(5 * time.Second); ; {
		r = s.do("POST", "/v1/claims", worker, map[string]any{"queue": "other"})
		if r.Status != 204 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	wantError(t, r, 429, "rate_limited", "")
	if r.Header.Get("Retry-After") == "" {
		t.Fatalf("429 without Retry-After")
	}
	s.enqueue("main", adminKey, map[string]any{"queue": "lp"})
	if r := await(t, ch); r.Status != 200 {
		t.Fatalf("long-poll: %d %s", r.Status, r.Body)
	}
	// The slot is free again.
	s.emptyClaim("main", worker, "other")
}

// An empty claim says whether its queue ever had a task: a worker polling
// a misspelled queue or namespace learns it at its first claim, and a
// queue that had work stays known when it runs dry.
func TestEmptyClaimSaysWhetherTheQueueIsKnown(t *testing.T) {
	dir, clock := t.TempDir(), tessera.NewManualClock(time.Now())
	s, stop := serverAt(t, dir, clock)
	known := func(ns, queue string) string {
		t.Helper()
		r := s.must(204, "POST", nsPath(ns, "/v1/claims"), adminKey, map[string]any{"queue": queue})
		return r.Header.Get("Tessera-Queue-Known")
	}
	if got := known("main", "typo"); got != "false" {
		t.Fatalf("a never-used queue: Tessera-Queue-Known %q, want false", got)
	}
	if got := known("nowhere", "default"); got != "false" {
		t.Fatalf("a never-used namespace: Tessera-Queue-Known %q, want false", got)
	}
	s.enqueue("main", adminKey, map[string]any{"title": "t", "queue": "typo"})
	s.submit("main", adminKey, s.claim("main", adminKey, "typo"), "succeeded")
	if got := known("main", "typo"); got != "true" {
		t.Fatalf("a queue that had a task: Tessera-Queue-Known %q, want true", got)
	}
	// A server started afresh learns it from the store, not from having
	// seen the enqueue.
	stop()
	s, _ = serverAt(t, dir, clock)
	r := s.must(204, "POST", "/v1/claims", adminKey, map[string]any{"queue": "typo"})
	if got := r.Header.Get("Tessera-Queue-Known"); got != "true" {
		t.Fatalf("after a restart: Tessera-Queue-Known %q, want true", got)
	}
}

// lease_lost says why, so a worker knows whether its work was taken: the
// run already ended, another run holds the task, the task waits in its
// queue again, the lease ran out, or the token is another task's.
func TestLeaseLostSaysWhy(t *testing.T) {
	s := newTestServer(t)
	beat := func(c claimed, id string) string {
		t.Helper()
		return wantError(t, s.do("POST", "/v1/claims/"+id+"/heartbeat", adminKey, map[string]any{"lease_token": c.Lease.Token}), 409, "lease_lost", "").Error.Message
	}
	says := func(what, msg, want string) {
		t.Helper()
		if !strings.Contains(msg, want) {
			t.Errorf("%s: %q does not say %q", what, msg, want)
		}
	}
	a := s.enqueue("main", adminKey, map[string]any{"title": "a", "queue": "why"})
	ca := s.claim("main", adminKey, "why")
	s.submit("main", adminKey, ca, "succeeded")
	says("after a submit", beat(ca, a.ID), "is already succeeded")

	b := s.enqueue("main", adminKey, map[string]any{"title": "b", "queue": "why"})
	cb := s.claim("main", adminKey, "why")
	says("another task's token", beat(ca, b.ID), "not of task "+b.ID)
	s.must(200, "POST", "/v1/claims/"+b.ID+"/release", adminKey, map[string]any{"lease_token": cb.Lease.Token})
	says("after a release", beat(cb, b.ID), "is ready again")

	cb = s.claim("main", adminKey, "why")
	s.Clock.Advance(time.Duration(cb.Lease.Seconds+1) * time.Second)
	says("past its expiry", beat(cb, b.ID), "expired before this request")
	s.Clock.Advance(time.Minute) // past the backoff
	s.claim("main", adminKey, "why")
	says("granted again", beat(cb, b.ID), "held by another run")
}

// A client that goes away in the middle of a long-poll is no server
// fault: the call is logged (at debug level: it is routine) and measured
// as 499 (nginx's convention) and counted canceled, never as a 503 or in
// the 5xx of the metrics.
func TestAClientThatHangsUpIsNoServerFault(t *testing.T) {
	logs := &logBuffer{}
	s, _ := serverWith(t, t.TempDir(), tessera.NewManualClock(time.Now()), func(o *app.Options) {
		o.Log = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	task := s.enqueue("main", adminKey, map[string]any{"title": "held", "queue": "hangup"})
	s.claim("main", adminKey, "hangup")
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", s.URL+"/v1/claims/"+task.ID+"/events?wait=10", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminKey)
	done := make(chan error, 1)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			res.Body.Close()
		}
		done <- err
	}()
	parked()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the request ended with %v, not by its client", err)
	}
	var line []string
	for deadline := time.Now().Add(10 * time.Second); len(line) == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		line = logs.lines(`"op":"claim.events"`)
	}
	if len(line) != 1 || !strings.Contains(line[0], `"level":"DEBUG"`) || !strings.Contains(line[0], `"status":499`) || !strings.Contains(line[0], `"code":"canceled"`) {
		t.Fatalf("the hang-up was logged %q", line)
	}
	scrape := string(s.must(200, "GET", "/metrics", adminKey, nil).Body)
	for _, want := range []string{
		`tessera_operations_total{code="canceled",op="claim.events",transport="http"} 1`,
		`tessera_http_requests_total{route="GET /v1/claims/{task_id}/events",status="499"} 1`,
	} {
		if !strings.Contains(scrape, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(scrape, `status="503"`) {
		t.Errorf("a 503 was measured: %s", scrape)
	}
}
