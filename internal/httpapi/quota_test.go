package httpapi_test

import (
	"context"
	"math"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/app"
	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/httpapi"
	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// spendAllowance makes the written allowance of the server's day spent.
func spendAllowance(t *testing.T, s *testServer) {
	t.Helper()
	if err := s.Meter.SetAllowance(context.Background(), meter.Allowance{RowsWrittenPerDay: 1}); err != nil {
		t.Fatal(err)
	}
}

// wantQuota checks a refusal: 503 storage_quota_exhausted, Retry-After the
// seconds to the next 00:00 UTC, reset_at that instant.
func wantQuota(t *testing.T, s *testServer, r *response) {
	t.Helper()
	wantError(t, r, 503, "storage_quota_exhausted", "")
	now := s.Clock.Now()
	reset := meter.NextReset(now)
	want := strconv.Itoa(int(math.Ceil(reset.Sub(now).Seconds())))
	if got := r.Header.Get("Retry-After"); got != want {
		t.Errorf("Retry-After %s, want %s", got, want)
	}
	var body httpapi.ErrorBody
	r.decode(t, &body)
	if body.Error.Details == nil || body.Error.Details.ResetAt == nil || !body.Error.Details.ResetAt.Equal(reset) {
		t.Errorf("reset_at %+v, want %s", body.Error.Details, reset)
	}
}

// A warm server whose written allowance is spent keeps its public face,
// refuses every keyed action honestly, writes nothing, and takes the
// client's idempotent retry once the allowance is raised (SPEC §13).
func TestQuotaRefusalEndToEnd(t *testing.T) {
	s := newTestServer(t)
	s.Clock.Set(time.Date(2026, 12, 1, 21, 30, 0, 0, time.UTC))
	key, _ := s.newKey("agent", "namespace:main", "read", "enqueue", "claim", "write")
	task := s.enqueue("main", key, map[string]any{"title": "before", "public": true})
	s.must(200, "GET", "/v1/health", "", nil)
	s.must(200, "GET", "/board", "", nil, "Accept", "application/json")

	spendAllowance(t, s)
	before := s.rowsWritten(func() {
		for _, p := range []string{"/", "/llms.txt", "/v1/openapi.json", "/healthz", "/v1/health", "/v1/public/activity"} {
			s.must(200, "GET", p, "", nil)
		}
		s.must(200, "GET", "/board", "", nil, "Accept", "application/json")

		wantQuota(t, s, s.do("POST", "/v1/tasks", key, map[string]any{"title": "refused"}, "Idempotency-Key", "retry-me"))
		wantQuota(t, s, s.do("GET", "/v1/counts", key, nil)) // its audit event cannot be written
		wantQuota(t, s, s.do("PUT", "/v1/records/b/k", key, map[string]any{"value": 1}))
		c := s.do("POST", "/v1/claims", key, map[string]any{"queue": "default"})
		wantQuota(t, s, c)                                                       // a grant writes
		s.must(204, "POST", "/v1/claims", key, map[string]any{"queue": "empty"}) // an empty claim writes nothing
	})
	if before != 0 {
		t.Errorf("refused requests wrote %d rows", before)
	}

	// Nothing half-written: the task is as it was, and no refused enqueue
	// or record exists.
	if err := s.Meter.SetAllowance(context.Background(), meter.Allowance{}); err != nil {
		t.Fatal(err)
	}
	var page core.TaskPage
	s.must(200, "GET", "/v1/tasks", key, nil).decode(t, &page)
	if len(page.Tasks) != 1 || page.Tasks[0].ID != task.ID || page.Tasks[0].State != tessera.StateReady {
		t.Fatalf("after refusals: %+v", page.Tasks)
	}
	wantError(t, s.do("GET", "/v1/records/b/k", key, nil), 404, "not_found", "")

	// The client's retry with the same Idempotency-Key acts once.
	first := s.must(201, "POST", "/v1/tasks", key, map[string]any{"title": "refused"}, "Idempotency-Key", "retry-me")
	again := s.must(201, "POST", "/v1/tasks", key, map[string]any{"title": "refused"}, "Idempotency-Key", "retry-me")
	if string(first.Body) != string(again.Body) {
		t.Error("the idempotent retry after the refusal acted twice")
	}
}

// The refusal ends at 00:00 UTC by itself.
func TestQuotaResetsAtUTCMidnight(t *testing.T) {
	s := newTestServer(t)
	s.Clock.Set(time.Date(2026, 12, 1, 23, 59, 0, 0, time.UTC))
	key, _ := s.newKey("agent", "namespace:main", "enqueue")
	spendAllowance(t, s)
	r := s.do("POST", "/v1/tasks", key, map[string]any{"title": "x"})
	wantQuota(t, s, r)
	if r.Header.Get("Retry-After") != "60" {
		t.Errorf("a minute before midnight Retry-After is %s", r.Header.Get("Retry-After"))
	}
	s.Clock.Advance(time.Minute)
	s.must(201, "POST", "/v1/tasks", key, map[string]any{"title": "x"})
}

// With --audit-reads=counted, keyed reads keep working while writes are
// refused; writes still answer 503.
func TestQuotaCountedReadsKeepWorking(t *testing.T) {
	s := newTestServer(t, func(c *core.Config) { c.CountReads = true })
	key, _ := s.newKey("agent", "namespace:main", "read", "enqueue")
	s.enqueue("main", key, map[string]any{})
	spendAllowance(t, s)
	s.must(200, "GET", "/v1/counts", key, nil)
	s.must(200, "GET", "/v1/tasks", key, nil)
	wantQuota(t, s, s.do("POST", "/v1/tasks", key, map[string]any{"title": "x"}))
}

// A cold start whose store lacks its schema while the allowance is spent
// creates nothing, still serves discovery, and answers 503 for the rest.
func TestQuotaColdStartWithoutSchema(t *testing.T) {
	dir := t.TempDir()
	clock := tessera.NewManualClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	m, err := meter.Open(dir+"/meter.json", clock, meter.Allowance{RowsWrittenPerDay: 5})
	if err != nil {
		t.Fatal(err)
	}
	m.Add(context.Background(), 5, 0)
	if err := m.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	a, err := app.Open(context.Background(), app.Options{DataDir: dir, Clock: clock, Core: core.DefaultConfig(),
		Allowance: meter.Allowance{RowsWrittenPerDay: 5}, AdminKey: adminKey})
	if err != nil {
		t.Fatalf("open while refusing: %v", err)
	}
	defer a.Close()
	if a.Refused == nil {
		t.Fatal("the app opened a store it could not create")
	}
	hs := httptest.NewServer(a.API)
	defer hs.Close()
	s := &testServer{t: t, URL: hs.URL, Clock: clock, Meter: a.Meter}
	s.must(200, "GET", "/llms.txt", "", nil)
	s.must(200, "GET", "/.well-known/agent-card.json", "", nil)
	wantQuota(t, s, s.do("GET", "/v1/tasks", adminKey, nil))
}
