package httpapi_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/testbin"
)

// scrape reads GET /metrics and returns its samples by "name{labels}" as
// printed, and the body.
func (s *testServer) scrape() (map[string]float64, []byte) {
	s.t.Helper()
	r := s.must(200, "GET", "/metrics", adminKey, nil)
	samples := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(r.Body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			s.t.Fatalf("metric line %q: %v", line, err)
		}
		samples[line[:i]] = v
	}
	return samples, r.Body
}

// After a known workload the metrics say what /v1/health says of queue q
// (every task there is public; the one private task counts only here), what the requests and runs were, and pass promtool's
// check of the exposition format.
func TestMetricsAfterAKnownWorkload(t *testing.T) {
	testbin.Needs(t, "promtool")
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool checks the exposition format (`make test` installs it: apt-get install prometheus): %v", err)
	}
	s := newTestServer(t)
	for i := range 5 {
		fields := map[string]any{"queue": "q", "public": true, "title": "t" + strconv.Itoa(i)}
		if i == 1 {
			fields["max_attempts"] = 1
		}
		s.enqueue("main", adminKey, fields)
	}
	// A private task: the metrics count it, public health does not.
	s.enqueue("main", adminKey, map[string]any{"queue": "private"})
	claimFor := func(lease int) claimed {
		var c claimed
		s.must(200, "POST", "/v1/claims", adminKey, map[string]any{"queue": "q", "lease_seconds": lease}).decode(t, &c)
		return c
	}
	s.submit("main", adminKey, claimFor(60), "succeeded") // t0
	s.submit("main", adminKey, claimFor(60), "failed")    // t1: its only attempt, so dead
	claimFor(60)                                          // t2: held
	claimFor(10)                                          // t3: lapses below
	s.Clock.Advance(11 * time.Second)                     // t4 has waited 11 s

	var health core.Health
	s.must(200, "GET", "/v1/health", "", nil).decode(t, &health)
	m, body := s.scrape()
	if len(health.Queues) != 1 {
		t.Fatalf("public health shows %d queues, want only q", len(health.Queues))
	}
	q := health.Queues[0]
	for name, want := range map[string]float64{
		`tessera_queue_tasks{namespace="main",queue="q",state="ready"}`:            float64(q.Counts["ready"]),
		`tessera_queue_tasks{namespace="main",queue="q",state="leased"}`:           float64(q.Counts["leased"]),
		`tessera_queue_tasks{namespace="main",queue="q",state="succeeded"}`:        float64(q.Counts["succeeded"]),
		`tessera_queue_tasks{namespace="main",queue="q",state="dead"}`:             float64(q.Counts["dead"]),
		`tessera_queue_leases{namespace="main",queue="q",state="live"}`:            float64(q.LiveLeases),
		`tessera_queue_leases{namespace="main",queue="q",state="expired"}`:         float64(q.ExpiredLeases),
		`tessera_queue_oldest_ready_age_seconds{namespace="main",queue="q"}`:       *q.OldestReadyAgeSeconds,
		`tessera_runs_ended_total{namespace="main",outcome="succeeded",queue="q"}`: 1,
		`tessera_runs_ended_total{namespace="main",outcome="failed",queue="q"}`:    1,
		`tessera_tasks_dead_total{namespace="main",outcome="failed",queue="q"}`:    1,
		`tessera_http_requests_total{route="POST /v1/tasks",status="201"}`:         6,
		`tessera_http_request_duration_seconds_count{route="POST /v1/tasks"}`:      6,
		`tessera_claim_wait_seconds_count{outcome="granted"}`:                      4,
		`tessera_storage_allowance_rows{kind="written"}`:                           0,
		`tessera_queue_metrics_error`:                                              0,
		`tessera_queue_tasks{namespace="main",queue="private",state="ready"}`:      1,
	} {
		if got, ok := m[name]; !ok || got != want {
			t.Errorf("%s = %v (present %t), want %v", name, got, ok, want)
		}
	}
	// The health the metrics were held to is the workload's.
	if q.Counts["ready"] != 1 || q.Counts["leased"] != 2 || q.LiveLeases != 1 || q.ExpiredLeases != 1 || *q.OldestReadyAgeSeconds != 11 {
		t.Errorf("health after the workload: %+v", q)
	}
	if written, _ := s.Meter.Lifetime(); m["tessera_storage_rows_written_total"] != float64(written) {
		t.Errorf("rows written %v, the meter says %d", m["tessera_storage_rows_written_total"], written)
	}
	for _, family := range []string{"go_goroutines", "process_resident_memory_bytes", `tessera_http_request_duration_seconds_bucket{route="POST /v1/tasks",le="+Inf"}`} {
		if _, ok := m[family]; !ok {
			t.Errorf("no %s", family)
		}
	}

	// A group-committing store says how many writes shared its commits;
	// one that syncs its own log also where their time went, phase by
	// phase.
	committer, groupCommit := s.DB.(interface{ CommitStats() store.CommitStats })
	syncing := groupCommit && committer.CommitStats().Syncing
	for _, phase := range store.WritePhases {
		name := `tessera_store_write_transaction_seconds_total{phase="` + phase + `"}`
		if v, ok := m[name]; ok != syncing || (syncing && v <= 0) {
			t.Errorf("%s = %v (present %t), want present with time only if the store syncs its commits itself (%t)", name, v, ok, syncing)
		}
	}
	if _, ok := m["tessera_store_wal_fsyncs_total"]; ok != syncing {
		t.Errorf("tessera_store_wal_fsyncs_total present %t, want %t", ok, syncing)
	}
	writes, ok := m["tessera_store_write_transactions_total"]
	// (SQLite's commits include its own bookkeeping, so neither bounds the
	// other.)
	if commits := m["tessera_store_commits_total"]; ok != groupCommit || (groupCommit && (commits < 1 || writes < 1)) {
		t.Errorf("tessera_store_write_transactions_total %v (present %t), commits %v: want both present and counting if the store commits for its requests (%t)", writes, ok, commits, groupCommit)
	}

	// A store that hears other nodes through a connection of its own
	// says whether it is up (1 here) and when it last heard anything.
	_, listens := s.DB.(interface{ ListenerStats() store.ListenerStats })
	if v, ok := m["tessera_listener_healthy"]; ok != listens || listens && v != 1 {
		t.Errorf("tessera_listener_healthy = %v (present %t), want 1 only if the store listens (%t)", v, ok, listens)
	}
	if v, ok := m["tessera_listener_last_notify_age_seconds"]; ok != listens || v < 0 {
		t.Errorf("tessera_listener_last_notify_age_seconds = %v (present %t), want present only if the store listens (%t)", v, ok, listens)
	}
	// One node alone: it hears no other, so it counts none.
	if v, ok := m["tessera_listener_peers"]; ok != listens || listens && v != 0 {
		t.Errorf("tessera_listener_peers = %v (present %t), want 0 only if the store listens (%t)", v, ok, listens)
	}
	if _, ok := m["tessera_notifications_sent_total"]; ok != listens {
		t.Errorf("tessera_notifications_sent_total present %t, want present only if the store listens (%t)", ok, listens)
	}

	check := exec.Command(promtool, "check", "metrics")
	check.Stdin = bytes.NewReader(body)
	if out, err := check.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}

	// The next claim notices t3's lapse (a run ended lapsed; t3 backs
	// off) and gets t4; the one after finds nothing ready.
	claimFor(60)
	s.must(204, "POST", "/v1/claims", adminKey, map[string]any{"queue": "q"})
	if m, _ := s.scrape(); m[`tessera_runs_ended_total{namespace="main",outcome="lapsed",queue="q"}`] != 1 || m[`tessera_claim_wait_seconds_count{outcome="empty"}`] != 1 {
		t.Errorf("after the lapse was noticed: lapsed %v, empty claims %v",
			m[`tessera_runs_ended_total{namespace="main",outcome="lapsed",queue="q"}`], m[`tessera_claim_wait_seconds_count{outcome="empty"}`])
	}
}

// The queue metrics keep the namespaces an operator watches: named
// namespaces first, however many demo namespaces sort before main, and
// every demo namespace summed into one "demo-*" series; past 256 named
// namespaces the rest are left out, and the metrics say so.
func TestMetricsKeepNamedNamespacesAndSumDemoOnes(t *testing.T) {
	s := newTestServer(t)
	for _, ns := range []string{"demo-aaa", "demo-bbb", "demo-ccc"} {
		s.enqueue(ns, adminKey, map[string]any{"queue": "practice"})
	}
	s.enqueue("main", adminKey, map[string]any{"queue": "q"})
	s.enqueue("zeta", adminKey, map[string]any{"queue": "q"})
	samples, body := s.scrape()
	for name, want := range map[string]float64{
		`tessera_queue_tasks{namespace="main",queue="q",state="ready"}`:          1,
		`tessera_queue_tasks{namespace="zeta",queue="q",state="ready"}`:          1,
		`tessera_queue_tasks{namespace="demo-*",queue="practice",state="ready"}`: 3,
		`tessera_queue_namespaces_truncated`:                                     0,
	} {
		if got, ok := samples[name]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", name, got, ok, want)
		}
	}
	if bytes.Contains(body, []byte(`namespace="demo-aaa"`)) {
		t.Errorf("a demo namespace has series of its own")
	}

	// A pass is kept 5 s: the many namespaces go to a server of their own.
	s = newTestServer(t)
	for _, ns := range []string{"demo-aaa", "demo-bbb", "demo-ccc"} {
		s.enqueue(ns, adminKey, map[string]any{"queue": "practice"})
	}
	s.enqueue("main", adminKey, map[string]any{"queue": "q"})
	for i := range core.MetricsNamespaces {
		s.enqueue(fmt.Sprintf("n%03d", i), adminKey, map[string]any{"queue": "q"})
	}
	samples, _ = s.scrape()
	if samples[`tessera_queue_namespaces_truncated`] != 1 {
		t.Errorf("%d named namespaces reported without saying some were left out", core.MetricsNamespaces+1)
	}
	if _, ok := samples[`tessera_queue_tasks{namespace="main",queue="q",state="ready"}`]; !ok {
		t.Errorf("main left out of the metrics")
	}
	if got := samples[`tessera_queue_tasks{namespace="demo-*",queue="practice",state="ready"}`]; got != 3 {
		t.Errorf("the demo sum after truncation: %v", got)
	}
}

// Ready tasks by group, for queues with lanes: of queue "fleet"'s 13
// groups the 10 with the most ready tasks (ties by name, "" for tasks
// without a group, whatever they require) have series of their own; the
// other three and the group named "other" are summed under "other". A
// leased task is not ready; a scheduled one is, as in tessera_queue_tasks.
// A queue without lanes has no series; one of fewer groups has no sum;
// the demo namespaces' queues are summed.
func TestMetricsReadyByGroupIsBounded(t *testing.T) {
	testbin.Needs(t, "promtool")
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool checks the exposition format (`make test` installs it: apt-get install prometheus): %v", err)
	}
	s := newTestServer(t)
	for g := 1; g <= 12; g++ {
		for range g {
			s.enqueue("main", adminKey, map[string]any{"queue": "fleet", "group": fmt.Sprintf("g%02d", g)})
		}
	}
	// A 13th task of g12, first in claim order, is claimed: 12 ready.
	s.enqueue("main", adminKey, map[string]any{"queue": "fleet", "group": "g12", "priority": 5})
	if c := s.claim("main", adminKey, "fleet"); c.Task.Group != "g12" || c.Task.Priority != 5 {
		t.Fatalf("claimed a task of group %q, priority %d", c.Task.Group, c.Task.Priority)
	}
	// No group: 3 plain, 1 requiring a GPU, 1 scheduled = 5, tied with g05.
	for range 3 {
		s.enqueue("main", adminKey, map[string]any{"queue": "fleet"})
	}
	s.enqueue("main", adminKey, map[string]any{"queue": "fleet", "requires": []string{"gpu"}})
	s.enqueue("main", adminKey, map[string]any{"queue": "fleet", "run_at": s.Clock.Now().Add(time.Hour)})
	s.enqueue("main", adminKey, map[string]any{"queue": "fleet", "group": "other"})
	s.enqueue("main", adminKey, map[string]any{"queue": "plain"})
	// Fewer than 11 groups: each its own series, "other" a group like any.
	s.enqueue("main", adminKey, map[string]any{"queue": "few", "group": "a"})
	for range 2 {
		s.enqueue("main", adminKey, map[string]any{"queue": "few", "group": "other"})
	}
	// Demo namespaces' groups are summed before the top 10 are picked.
	for _, ns := range []string{"demo-aaa", "demo-bbb"} {
		s.enqueue(ns, adminKey, map[string]any{"queue": "practice", "group": "team"})
	}

	_, body := s.scrape()
	var got []string
	for _, line := range strings.Split(string(body), "\n") {
		if strings.Contains(line, "tessera_queue_ready_by_group") {
			got = append(got, line)
		}
	}
	// In the order the registry writes them: by label values.
	want := `# HELP tessera_queue_ready_by_group Ready tasks (scheduled included) of a queue with lanes, by group ("": no group): the 10 groups of the queue with the most have a series each, the rest are summed under group "other".
# TYPE tessera_queue_ready_by_group gauge
tessera_queue_ready_by_group{group="",namespace="main",queue="fleet"} 5
tessera_queue_ready_by_group{group="a",namespace="main",queue="few"} 1
tessera_queue_ready_by_group{group="g04",namespace="main",queue="fleet"} 4
tessera_queue_ready_by_group{group="g05",namespace="main",queue="fleet"} 5
tessera_queue_ready_by_group{group="g06",namespace="main",queue="fleet"} 6
tessera_queue_ready_by_group{group="g07",namespace="main",queue="fleet"} 7
tessera_queue_ready_by_group{group="g08",namespace="main",queue="fleet"} 8
tessera_queue_ready_by_group{group="g09",namespace="main",queue="fleet"} 9
tessera_queue_ready_by_group{group="g10",namespace="main",queue="fleet"} 10
tessera_queue_ready_by_group{group="g11",namespace="main",queue="fleet"} 11
tessera_queue_ready_by_group{group="g12",namespace="main",queue="fleet"} 12
tessera_queue_ready_by_group{group="other",namespace="main",queue="few"} 2
tessera_queue_ready_by_group{group="other",namespace="main",queue="fleet"} 7
tessera_queue_ready_by_group{group="team",namespace="demo-*",queue="practice"} 2`
	if strings.Join(got, "\n") != want {
		t.Errorf("the ready-by-group exposition:\n%s\nwant:\n%s", strings.Join(got, "\n"), want)
	}
	check := exec.Command(promtool, "check", "metrics")
	check.Stdin = bytes.NewReader(body)
	if out, err := check.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
