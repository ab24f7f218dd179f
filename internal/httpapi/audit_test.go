package httpapi_test

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/ids"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

func adminAudit(s *testServer, query string) core.AuditPage {
	s.t.Helper()
	var page core.AuditPage
	s.must(200, "GET", "/v1/admin/audit?limit=200&"+query, adminKey, nil).decode(s.t, &page)
	return page
}

// counted sums a page's counters with the given outcome.
func counted(page core.AuditPage, outcome string) int64 {
	var n int64
	for _, c := range page.Counters {
		if c.Outcome == outcome {
			n += c.Count
		}
	}
	return n
}

func eventActions(page core.AuditPage) map[string]tessera.AuditEvent {
	out := map[string]tessera.AuditEvent{}
	for _, e := range page.Events {
		if _, seen := out[e.Action]; !seen {
			out[e.Action] = e
		}
	}
	return out
}

// Every successful action, reads included, leaves exactly one event with
// who, what, which run, and a hashed address (SPEC §9).
func TestAuditEventPerSuccessfulAction(t *testing.T) {
	s := newTestServer(t)
	key, pid := s.newKey("agent", "namespace:*", "read", "enqueue", "claim")
	s.must(200, "GET", "/v1/me", key, nil)
	task := s.enqueue("main", key, map[string]any{"title": "audited"})
	s.must(200, "GET", "/v1/tasks", key, nil)
	s.must(200, "GET", "/v1/tasks/"+task.ID, key, nil)
	s.must(200, "GET", "/v1/counts", key, nil)
	c := s.claim("main", key, "default")
	s.must(201, "POST", "/v1/tasks/"+task.ID+"/notes", key, map[string]any{"body": "hi"})
	s.must(200, "GET", "/v1/claims/"+task.ID+"/events?since=0", key, nil)
	s.must(200, "POST", "/v1/claims/"+task.ID+"/heartbeat", key, map[string]any{"lease_token": c.Lease.Token})
	s.must(200, "POST", "/v1/claims/"+task.ID+"/release", key, map[string]any{"lease_token": c.Lease.Token})
	c = s.claim("main", key, "default")
	s.must(200, "POST", "/v1/claims/"+task.ID+"/submit", key, map[string]any{"lease_token": c.Lease.Token, "outcome": "succeeded"})
	other := s.enqueue("main", key, map[string]any{"title": "second"})
	s.must(200, "POST", "/v1/tasks/"+other.ID+"/pause", key, nil)
	s.must(200, "POST", "/v1/tasks/"+other.ID+"/resume", key, nil)
	s.must(200, "POST", "/v1/tasks/"+other.ID+"/cancel", key, nil)
	s.must(200, "POST", "/v1/tasks/"+other.ID+"/retry", key, nil)

	page := adminAudit(s, "principal="+pid)
	got := eventActions(page)
	for _, action := range []string{core.ActMe, core.ActTaskEnqueue, core.ActTaskList, core.ActTaskGet, core.ActCounts,
		core.ActClaim, core.ActTaskNote, core.ActClaimEvents, core.ActHeartbeat, core.ActRelease, core.ActSubmit,
		core.ActTaskPause, core.ActTaskResume, core.ActTaskCancel, core.ActTaskRetry} {
		e, ok := got[action]
		if !ok {
			t.Errorf("no event for %s", action)
			continue
		}
		if e.PrincipalID != pid || e.KeyID == "" || e.Namespace != "main" || e.IPHash == "" || e.Status < 200 || e.Status > 299 {
			t.Errorf("%s event incomplete: %+v", action, e)
		}
	}
	// The run is named when the target belongs to one.
	if got[core.ActHeartbeat].RunID == "" || got[core.ActSubmit].RunID != c.Lease.RunID || got[core.ActClaim].RunID == "" {
		t.Errorf("run ids: heartbeat %q submit %q claim %q", got[core.ActHeartbeat].RunID, got[core.ActSubmit].RunID, got[core.ActClaim].RunID)
	}
	// Exactly one event per action: 16 requests above, two claims, two
	// enqueues.
	if n := len(page.Events); n != 17 {
		t.Errorf("%d events for 17 successful actions", n)
	}
	// Admin actions are audited too, under the admin's principal.
	if _, ok := eventActions(adminAudit(s, ""))[core.ActKeyNew]; !ok {
		t.Error("no event for the admin's key creation")
	}
}

// Denials, failures, 429s, empty claims and long-poll timeouts are counted
// per minute, never evented (SPEC §9).
func TestAuditCountersForNoOps(t *testing.T) {
	s := newTestServer(t, func(c *core.Config) { c.ClaimRate, c.ClaimBurst, c.AdmissionWait = 0.001, 3, 10*time.Millisecond })
	key, pid := s.newKey("agent", "namespace:main", "read", "claim")
	s.do("GET", "/v1/tasks", "tsk_nosuchkey_abcdefghijklmnopqrstuvwxyz0123", nil) // 401
	s.do("GET", "/ns/other/v1/tasks", key, nil)                                   // 403
	s.do("POST", "/v1/tasks", key, map[string]any{"title": "x"})                  // 403 (scope)
	s.do("GET", "/v1/tasks?limit=999", key, nil)                                  // 400
	s.must(204, "POST", "/v1/claims", key, map[string]any{"queue": "q"})
	s.must(204, "POST", "/v1/claims", key, map[string]any{"queue": "q"})
	s.must(204, "POST", "/v1/claims", key, map[string]any{"queue": "q"})
	s.must(429, "POST", "/v1/claims", key, map[string]any{"queue": "q"})

	want := map[string]int64{"unauthorized": 1, "forbidden": 2, "invalid_request": 1, "empty": 3, "rate_limited": 1}
	var page core.AuditPage
	s.must(200, "GET", "/v1/admin/audit", adminKey, nil).decode(t, &page)
	got := map[string]int64{}
	for _, c := range page.Counters {
		got[c.Outcome] += c.Count
		if c.Outcome == "unauthorized" && c.PrincipalID != tessera.Anonymous {
			t.Errorf("a 401 is counted as %q, want anonymous", c.PrincipalID)
		}
		if c.Outcome == "empty" && (c.PrincipalID != pid || c.Action != core.ActClaim) {
			t.Errorf("empty claim counter: %+v", c)
		}
		// A denial is counted under the action it was denied, the same
		// name its success would be audited under.
		if c.Outcome == "forbidden" && c.Namespace == "main" && c.Action != core.ActTaskEnqueue {
			t.Errorf("denied enqueue counted as %q", c.Action)
		}
	}
	for outcome, n := range want {
		if got[outcome] != n {
			t.Errorf("counter %s = %d, want %d (all: %v)", outcome, got[outcome], n, got)
		}
	}
	// None of them is an event.
	for _, e := range page.Events {
		if e.PrincipalID == pid {
			t.Errorf("no-op left an event: %+v", e)
		}
	}
}

// A long-poll that times out is counted; a claim-events request is one
// event however many looks it made.
func TestAuditClaimEventsOncePerRequest(t *testing.T) {
	s := newTestServer(t)
	key, pid := s.newKey("agent", "namespace:main", "enqueue", "claim")
	task := s.enqueue("main", key, map[string]any{})
	s.claim("main", key, "default")
	s.must(200, "GET", "/v1/claims/"+task.ID+"/events?since=0&wait=1", key, nil) // times out
	go func() {
		time.Sleep(200 * time.Millisecond)
		s.do("POST", "/v1/tasks/"+task.ID+"/notes", key, map[string]any{"body": "wake"})
	}()
	s.must(200, "GET", "/v1/claims/"+task.ID+"/events?since=0&wait=10", key, nil) // wakes once

	page := adminAudit(s, "principal="+pid+"&action="+core.ActClaimEvents)
	if len(page.Events) != 1 {
		t.Errorf("%d claim-events events, want 1", len(page.Events))
	}
	if timeouts := counted(page, core.OutcomeTimeout); timeouts != 1 {
		t.Errorf("%d long-poll timeouts counted, want 1", timeouts)
	}
}

// No key secret or lease token appears in any audit response, or anywhere
// in the database file.
func TestAuditHoldsNoSecrets(t *testing.T) {
	s := newTestServer(t)
	key, _ := s.newKey("agent", "namespace:main", "read", "enqueue", "claim")
	s.enqueue("main", key, map[string]any{"payload": map[string]any{"secret-payload": "p4yl0ad"}})
	c := s.claim("main", key, "default")
	s.must(200, "POST", "/v1/claims/"+c.Task.ID+"/heartbeat", key, map[string]any{"lease_token": c.Lease.Token})
	s.do("GET", "/v1/tasks", key[:len(key)-3]+"xyz", nil) // a wrong secret, counted
	secret := key[strings.LastIndexByte(key, '_')+1:]
	leaseSecret := c.Lease.Token[strings.IndexByte(c.Lease.Token, '.')+1:]

	bodies := [][]byte{s.must(200, "GET", "/v1/admin/audit", adminKey, nil).Body, s.must(200, "GET", "/v1/me/audit", key, nil).Body}
	for _, b := range bodies {
		for _, needle := range []string{secret, leaseSecret, "p4yl0ad", "127.0.0.1"} {
			if bytes.Contains(b, []byte(needle)) {
				t.Errorf("audit response contains %q", needle)
			}
		}
	}
	s.Core.Close() // write buffered counters
	dbPath := filepath.Join(filepath.Dir(s.dataFile()), "tessera.db")
	for _, f := range []string{dbPath, dbPath + "-wal"} {
		raw, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, needle := range []string{secret, leaseSecret, adminKey[strings.LastIndexByte(adminKey, '_')+1:]} {
			if bytes.Contains(raw, []byte(needle)) {
				t.Errorf("%s contains a secret", filepath.Base(f))
			}
		}
	}
}

// ip_hash is computed over the address group: IPv4 as is, IPv6 by /64,
// IPv4-mapped IPv6 by its IPv4.
func TestAuditIPHashGrouping(t *testing.T) {
	s := newTestServer(t)
	key, pid := s.newKey("agent", "namespace:main", "read")
	handler := s.HTTP.Config.Handler
	from := func(remote string) string {
		req := httptest.NewRequest("GET", "/v1/counts", nil)
		req.RemoteAddr = remote
		req.Header.Set("Authorization", "Bearer "+key)
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("%s: %d", remote, rec.Code)
		}
		page := adminAudit(s, "principal="+pid+"&limit=1")
		return page.Events[0].IPHash
	}
	v4 := from("198.51.100.7:1234")
	mapped := from("[::ffff:198.51.100.7]:1234")
	otherV4 := from("198.51.100.8:1234")
	a := from("[2001:db8:1:2::1]:1234")
	b := from("[2001:db8:1:2:ffff::9]:1234")
	c := from("[2001:db8:1:3::1]:1234")
	if v4 == "" || v4 != mapped {
		t.Errorf("IPv4-mapped %q differs from IPv4 %q", mapped, v4)
	}
	if v4 == otherV4 {
		t.Error("two IPv4 addresses share a hash")
	}
	if a != b {
		t.Error("two addresses of one IPv6 /64 hash differently")
	}
	if a == c {
		t.Error("two IPv6 /64s share a hash")
	}
}

// Observational writes (§8): five keyed reads inside 60 s write the same
// rows each; past 60 s exactly one profile write more; a changed kind is
// written at once and seen by the next request.
func TestAuditObservationalWrites(t *testing.T) {
	s := newTestServer(t)
	// At noon: a read that crosses midnight writes the new day's address
	// salt, which is not what this test counts.
	s.Clock.Set(s.Clock.Now().Truncate(24 * time.Hour).Add(36 * time.Hour))
	key, pid := s.newKey("agent", "namespace:main", "read")
	written := func() int64 { return s.rowsWritten(func() { s.must(200, "GET", "/v1/counts", key, nil) }) }
	first := written()
	steady := written()
	for i := range 3 {
		s.Clock.Advance(10 * time.Second)
		if w := written(); w != steady {
			t.Errorf("read %d inside 60 s wrote %d rows, the second wrote %d", i+3, w, steady)
		}
	}
	if first <= steady {
		t.Errorf("first read wrote %d, later reads %d: no profile write on first use", first, steady)
	}
	// One profile write is one principals row: last_used_at is in no
	// index, and the purge index holds only anonymous principals.
	const profile = 1
	s.Clock.Advance(61 * time.Second)
	if w := written(); w != steady+profile {
		t.Errorf("after 60 s a read wrote %d rows, want %d (one last_used_at write)", w, steady+profile)
	}
	if w := written(); w != steady {
		t.Errorf("right after the profile write a read wrote %d, want %d", w, steady)
	}

	s.must(200, "PATCH", "/v1/admin/principals/"+pid, adminKey, map[string]any{"kind": "service"})
	var me core.Me
	s.must(200, "GET", "/v1/me", key, nil).decode(t, &me)
	if me.Principal.Kind != "service" {
		t.Errorf("kind after change: %q", me.Principal.Kind)
	}
	if w := written(); w != steady {
		t.Errorf("a read after the identity write wrote %d, want %d", w, steady)
	}
}

// Audit reads reach back 24 h only; retention deletes what is older in
// batches.
func TestAuditWindowAndRetention(t *testing.T) {
	s := newTestServer(t)
	key, pid := s.newKey("agent", "namespace:main", "read")
	for range 3 {
		s.must(200, "GET", "/v1/counts", key, nil)
	}
	if n := len(adminAudit(s, "principal="+pid).Events); n != 3 {
		t.Fatalf("%d events, want 3", n)
	}
	s.Clock.Advance(25 * time.Hour)
	if n := len(adminAudit(s, "principal="+pid).Events); n != 0 {
		t.Errorf("%d events older than 24 h still shown", n)
	}
	before := s.Meter.Today().RowsWritten
	ran, err := s.Core.RunRetention(t.Context())
	if err != nil || !ran {
		t.Fatalf("retention: ran %v, %v", ran, err)
	}
	if deleted := s.Meter.Today().RowsWritten - before; deleted < 3 {
		t.Errorf("retention wrote %d rows, want the 3 old events (and more) deleted", deleted)
	}
	if ran, _ := s.Core.RunRetention(t.Context()); ran {
		t.Error("retention ran twice within 5 minutes")
	}
}

// Reading an execution record names the run that wrote it (SPEC §9).
func TestAuditRecordReadNamesItsRun(t *testing.T) {
	s := newTestServer(t)
	key, pid := s.newKey("agent", "namespace:main", "read", "enqueue", "claim", "write")
	s.enqueue("main", key, map[string]any{})
	c := s.claim("main", key, "default")
	s.must(201, "PUT", "/v1/records/results/r1", key, map[string]any{"value": 1, "lease_token": c.Lease.Token})
	s.must(200, "GET", "/v1/records/results/r1", key, nil)
	page := adminAudit(s, "principal="+pid+"&action="+core.ActRecordRead)
	if len(page.Events) != 1 || page.Events[0].RunID != c.Lease.RunID || page.Events[0].Target != "results/r1" {
		t.Fatalf("record read events: %+v, want one naming run %s", page.Events, c.Lease.RunID)
	}
	write := adminAudit(s, "principal="+pid+"&action="+core.ActRecordWrite)
	if len(write.Events) != 1 || write.Events[0].RunID != c.Lease.RunID {
		t.Errorf("record write events: %+v", write.Events)
	}
}

// Retention drains more than one batch, and purges anonymous principals
// past their purge time with their keys.
func TestRetentionDrainsEveryBatch(t *testing.T) {
	ctx := t.Context()
	s := newTestServer(t)
	old := s.Clock.Now()
	purge := old.Add(time.Hour)
	anon := &tessera.Principal{ID: ids.New(old), Kind: tessera.KindAnonymous, CreatedAt: old, PurgeAt: &purge}
	const events = 1234
	err := s.DB.Update(t.Context(), func(tx store.Tx) error {
		if err := tx.PrincipalCreate(ctx, anon); err != nil {
			return err
		}
		if err := tx.KeyCreate(ctx, &tessera.Key{ID: "anonkey1", PrincipalID: anon.ID, Scopes: []string{"read"}, CreatedAt: old, SecretHash: []byte{1}}); err != nil {
			return err
		}
		for range events {
			now := s.Clock.Now()
			if err := tx.AuditInsert(ctx, &tessera.AuditEvent{ID: ids.New(now), Time: now, Namespace: "main", PrincipalID: anon.ID,
				KeyID: "anonkey1", Action: core.ActCounts, Target: "counts", Status: 200}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Clock.Advance(26 * time.Hour)
	deleted := s.rowsWritten(func() {
		if ran, err := s.Core.RunRetention(t.Context()); err != nil || !ran {
			t.Fatalf("retention: %v %v", ran, err)
		}
	})
	if deleted < events+2 {
		t.Errorf("retention deleted %d rows, want at least %d events, the principal and its key", deleted, events+2)
	}
	err = s.DB.View(t.Context(), func(tx store.Tx) error {
		left, err := tx.AuditEvents(ctx, store.AuditFilter{Since: old.Add(-time.Hour), Limit: 10})
		if err != nil {
			return err
		}
		if len(left) != 0 {
			t.Errorf("%d old events survived retention", len(left))
		}
		if _, _, err := tx.KeyLookup(ctx, "anonkey1"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("purged principal's key: %v", err)
		}
		if _, err := tx.PrincipalGet(ctx, anon.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("purged principal: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// An idempotent replay does nothing again, so it writes no event: it is
// counted, and the public feed shows the one enqueue.
func TestAuditReplayIsCountedNotEvented(t *testing.T) {
	s := newTestServer(t)
	key, pid := s.newKey("agent", "namespace:main", "enqueue", "read")
	for range 3 {
		s.must(201, "POST", "/v1/tasks", key, map[string]any{"title": "once", "public": true}, "Idempotency-Key", "k1")
	}
	page := adminAudit(s, "principal="+pid+"&action="+core.ActTaskEnqueue)
	if len(page.Events) != 1 {
		t.Errorf("%d enqueue events for one enqueue and two replays", len(page.Events))
	}
	if replays := counted(page, core.OutcomeReplayed); replays != 2 {
		t.Errorf("%d replays counted, want 2", replays)
	}
	var feed core.ActivityPage
	s.must(200, "GET", "/v1/public/activity", "", nil).decode(t, &feed)
	if len(feed.Events) != 1 {
		t.Errorf("public feed shows %d events for one enqueue", len(feed.Events))
	}
}

// Reads and heartbeats of public work are audited but not published: the
// feed shows enqueues, claims, submits and public record writes.
func TestActivityLeavesOutReadsAndHeartbeats(t *testing.T) {
	s := newTestServer(t)
	key, _ := s.newKey("agent", "namespace:main", "enqueue", "read", "claim")
	task := s.enqueue("main", key, map[string]any{"public": true})
	c := s.claim("main", key, "default")
	for range 2 {
		s.must(200, "GET", "/v1/tasks/"+task.ID, key, nil)
		s.must(200, "POST", "/v1/claims/"+task.ID+"/heartbeat", key, map[string]any{"lease_token": c.Lease.Token})
	}
	var feed core.ActivityPage
	s.must(200, "GET", "/v1/public/activity", "", nil).decode(t, &feed)
	for _, e := range feed.Events {
		if e.Action == core.ActTaskGet || e.Action == core.ActHeartbeat {
			t.Errorf("the public feed publishes %s", e.Action)
		}
	}
	if len(feed.Events) != 2 {
		t.Errorf("feed has %d events, want the enqueue and the claim", len(feed.Events))
	}
}

// /ns/{ns}/v1/me answers any valid key, and writes nothing into a namespace
// the key has no grant for (§4).
func TestMeUnderForeignNamespaceWritesNothingThere(t *testing.T) {
	s := newTestServer(t)
	key, _ := s.newKey("agent", "namespace:main", "read")
	s.must(200, "GET", "/ns/someone-else/v1/me", key, nil)
	if page := adminAudit(s, "namespace=someone-else"); len(page.Events) != 0 {
		t.Errorf("a key without a grant left %d events in someone-else", len(page.Events))
	}
}
