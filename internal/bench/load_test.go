package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/client"
	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/testserver"
)

// raisedAdmission is what the bench gives the servers it starts.
func raisedAdmission(c *core.Config) {
	c.ClaimRate, c.ClaimBurst, c.ClaimConcurrency = 1e6, 1e6, 1e4
}

// A short lifecycle run against a real server passes its verification,
// and every figure of the report is there. Figures are never held to a
// speed: the machine is shared.
func TestLoadLifecycleAgainstURL(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a load of a few seconds")
	}
	s := testserver.Start(t, testserver.Options{Core: raisedAdmission})
	rep, err := Load(context.Background(), LoadOptions{URL: s.URL, Key: testserver.AdminKey, Workers: 2,
		Duration: 2 * time.Second, NoOpDuration: time.Second, Window: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, rep, "enqueue")
	v := rep.Verify
	// Each worker's warm-up lifecycle is verified too, but not measured.
	if want := int(rep.Tasks) + 2; v.Enqueued != want || v.Succeeded != want || v.ServerListed != want || v.RunsChecked != want {
		t.Errorf("verify: %+v, want %d tasks enqueued, succeeded, listed and checked", v, want)
	}
	if v.Sampling != fmt.Sprintf("runs of all %d tasks", v.ServerListed) {
		t.Errorf("sampling %q", v.Sampling)
	}
	if rep.Mode != "lifecycle" || rep.CallsPerTask != 4 || rep.Backlog != nil {
		t.Errorf("mode %q, %d calls per task, backlog %+v", rep.Mode, rep.CallsPerTask, rep.Backlog)
	}
	if len(rep.Windows) < 2 {
		t.Errorf("windows %+v: want one per 0.5 s of a 2 s run", rep.Windows)
	}
	var inWindows int64
	for _, w := range rep.Windows {
		inWindows += w.Tasks
	}
	if inWindows != rep.Tasks {
		t.Errorf("windows hold %d tasks, the run %d", inWindows, rep.Tasks)
	}
	// The server is in this process: memory and CPU come from its
	// process metrics, as for any --url server without --pid.
	if n := rep.Nodes[0]; n.From != "metrics" || n.IdleRSSBytes == nil || n.EndRSSBytes == nil || n.CPUCores == nil {
		t.Errorf("node %+v: want RSS and CPU from /metrics", n)
	}
	// So its CPU is in the bench's too: no ceiling is drawn from them.
	if c := rep.CPU; c == nil || c.CeilingTasksPerSecond != nil || c.Cores != 0 {
		t.Errorf("CPU per call %+v: want no ceiling for a server in this process", c)
	}
}

// A backlog is enqueued in batches, or as single enqueues when the
// server refuses the batch route, then worked off to the end: exactly
// the backlog is measured.
func TestLoadBacklogAgainstURL(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a load of a few seconds")
	}
	noBatch := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, batchPath) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusNotFound)
				_, _ = w.Write([]byte(`{"error":{"code":"not_found","message":"no such route"}}`))
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	for _, c := range []struct {
		method, call string
		wrap         func(http.Handler) http.Handler
	}{{"batch", "enqueue_batch", nil}, {"single", "enqueue", noBatch}} {
		t.Run(c.method, func(t *testing.T) {
			s := testserver.Start(t, testserver.Options{Core: raisedAdmission, Wrap: c.wrap})
			rep, err := Load(context.Background(), LoadOptions{URL: s.URL, Key: testserver.AdminKey, Workers: 2,
				Backlog: 50, NoOpDuration: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			checkReport(t, rep, c.call)
			if rep.Mode != "backlog" || rep.CallsPerTask != 3 || rep.Tasks != 50 {
				t.Errorf("mode %q, %d calls per task, %d tasks: want backlog, 3, 50", rep.Mode, rep.CallsPerTask, rep.Tasks)
			}
			if b := rep.Backlog; b == nil || b.Tasks != 50 || b.Method != c.method || b.TasksPerSecond <= 0 || b.RowsWritten == nil ||
				(c.wrap != nil) != strings.Contains(b.Note, "refused") {
				t.Errorf("backlog %+v: want 50 tasks by %s, with a rate and rows, and a note only when batches were refused", b, c.method)
			}
			if v := rep.Verify; v.Enqueued != 52 || v.Succeeded != 52 || v.Left != 0 {
				t.Errorf("verify %+v: want the 50 and the 2 warm-ups succeeded", v)
			}
		})
	}
}

// --heartbeat=false works the tasks off with a claim and a submit each:
// the server is sent no heartbeat, and the ratio counts two calls. With
// heartbeats, each of the 52 tasks (the backlog and the two warm-ups)
// gets exactly one.
func TestLoadBacklogHeartbeatsOrNot(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a load of a few seconds")
	}
	for _, c := range []struct {
		noHeartbeat bool
		calls       int
		heartbeats  int64
	}{{false, 3, 52}, {true, 2, 0}} {
		t.Run(fmt.Sprintf("heartbeat=%v", !c.noHeartbeat), func(t *testing.T) {
			var heartbeats atomic.Int64
			count := func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if strings.HasSuffix(r.URL.Path, "/heartbeat") {
						heartbeats.Add(1)
					}
					h.ServeHTTP(w, r)
				})
			}
			s := testserver.Start(t, testserver.Options{Core: raisedAdmission, Wrap: count})
			rep, err := Load(context.Background(), LoadOptions{URL: s.URL, Key: testserver.AdminKey, Workers: 2,
				Backlog: 50, NoOpDuration: time.Second, NoHeartbeat: c.noHeartbeat})
			if err != nil {
				t.Fatal(err)
			}
			checkReport(t, rep, "enqueue_batch")
			if rep.Heartbeat == c.noHeartbeat || rep.CallsPerTask != c.calls || rep.Tasks != 50 {
				t.Errorf("heartbeat %v, %d calls per task, %d tasks: want %v, %d, 50", rep.Heartbeat, rep.CallsPerTask, rep.Tasks, !c.noHeartbeat, c.calls)
			}
			if got := heartbeats.Load(); got != c.heartbeats {
				t.Errorf("the server was sent %d heartbeats, want %d", got, c.heartbeats)
			}
		})
	}
}

// --batch works the backlog off in batches: the 50 tasks take five batch
// claims of ten (and one empty one a worker, which ends its work-off) and
// five batch submits; no single claim or submit is sent after the
// warm-up, and every task succeeds once.
func TestLoadBacklogInBatches(t *testing.T) {
	var batchClaims, batchSubmits, singles atomic.Int64
	count := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case strings.HasSuffix(r.URL.Path, "/v1/claims/batch"):
				batchClaims.Add(1)
			case strings.HasSuffix(r.URL.Path, "/v1/claims/submit"):
				batchSubmits.Add(1)
			case strings.HasSuffix(r.URL.Path, "/submit"):
				singles.Add(1)
			}
			h.ServeHTTP(w, r)
		})
	}
	s := testserver.Start(t, testserver.Options{Core: raisedAdmission, Wrap: count})
	rep, err := Load(context.Background(), LoadOptions{URL: s.URL, Key: testserver.AdminKey, Workers: 2,
		Backlog: 50, Batch: 10, NoOpDuration: time.Second, NoHeartbeat: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Batch != 10 || rep.CallsPerTask != 1 || rep.Tasks != 50 {
		t.Errorf("batch %d, %d calls per task, %d tasks: want 10, 1, 50", rep.Batch, rep.CallsPerTask, rep.Tasks)
	}
	if c, sb, single := batchClaims.Load(), batchSubmits.Load(), singles.Load(); c != 7 || sb != 5 || single != 2 {
		t.Errorf("%d batch claims, %d batch submits, %d single submits; want 7, 5 and the warm-ups' 2", c, sb, single)
	}
	if v := rep.Verify; !v.Pass || v.Succeeded != 52 {
		t.Errorf("verify %+v: want the 50 and the 2 warm-ups succeeded", v)
	}
}

// The route check reads the OpenAPI description as it is written.
func TestHasRoute(t *testing.T) {
	s := testserver.Start(t, testserver.Options{})
	admin, _ := client.New(s.URL, client.WithKey(testserver.AdminKey))
	for path, want := range map[string]bool{"/v1/tasks": true, batchPath: true, "/v1/no-such-route": false} {
		if got, err := hasRoute(context.Background(), admin, "post", path); err != nil || got != want {
			t.Errorf("POST %s listed: %v, %v; want %v", path, got, err, want)
		}
	}
}

// checkReport holds a passing run's report to having every figure, and
// a latency row for exactly the calls the run made: enqueueCall, claim,
// heartbeat (unless the run made none) and submit.
func checkReport(t *testing.T, rep *LoadReport, enqueueCall string) {
	t.Helper()
	if rep.Verify == nil || !rep.Verify.Pass {
		t.Fatalf("verification: %+v", rep.Verify)
	}
	if rep.Verify.LeasedTwice != 0 || rep.Verify.SubmittedTwice != 0 || rep.Verify.Lost != 0 || rep.Verify.FailedCalls != 0 {
		t.Errorf("verify %+v", rep.Verify)
	}
	if rep.Tasks <= 0 || rep.TasksPerSecond <= 0 || rep.Seconds <= 0 || len(rep.Windows) == 0 {
		t.Errorf("tasks %d, %.1f/s over %.2f s, windows %v", rep.Tasks, rep.TasksPerSecond, rep.Seconds, rep.Windows)
	}
	if rep.NoOp.Requests <= 0 || rep.NoOp.RequestsPerSecond <= 0 || rep.NoOp.BeforeRequestsPerSecond <= 0 ||
		rep.NoOp.AfterRequestsPerSecond <= 0 || rep.NoOp.Errors != 0 || rep.Ratio <= 0 {
		t.Errorf("no-op %+v, ratio %v", rep.NoOp, rep.Ratio)
	}
	calls := map[string]Latency{}
	for _, l := range rep.Latency {
		calls[l.Call] = l
	}
	want := []string{enqueueCall, "claim", "heartbeat", "submit"}
	if !rep.Heartbeat {
		want = []string{enqueueCall, "claim", "submit"}
	}
	if len(calls) != len(want) {
		t.Errorf("latency rows %+v, want %v", rep.Latency, want)
	}
	for _, name := range want {
		l, ok := calls[name]
		if !ok || l.Calls == 0 || l.P50 <= 0 || l.P95 < l.P50 || l.P99 < l.P95 || l.Errors != 0 {
			t.Errorf("%s latency %+v", name, l)
		}
	}
	if rep.RowsWrittenPerTask == nil || *rep.RowsWrittenPerTask <= 0 || rep.RowsReadPerTask == nil || rep.RowsFrom != "metrics" {
		t.Errorf("rows per task: written %v, read %v, from %q", rep.RowsWrittenPerTask, rep.RowsReadPerTask, rep.RowsFrom)
	}
	if rep.StorePerTask == nil || rep.BenchCPUCores == nil || len(rep.Nodes) != 1 || !strings.HasPrefix(rep.Namespace, "bench-") {
		t.Errorf("store counters %v, bench CPU %v, nodes %+v, namespace %q", rep.StorePerTask, rep.BenchCPUCores, rep.Nodes, rep.Namespace)
	}
	if c := rep.NoOp.CPUMicrosPerRequest; c == nil || *c <= 0 {
		t.Errorf("no-op CPU per request %v: this process's CPU is in /proc", c)
	}
	if rep.CPU == nil || rep.CPU.ServerMicros <= 0 || rep.CPU.BenchMicros <= 0 {
		t.Errorf("CPU per call %+v", rep.CPU)
	}
	var text strings.Builder
	WriteLoad(&text, rep)
	lines := []string{"tasks ", "tasks/s per window", "no-op ", "ratio ", "rows/task ", "commits, fsyncs/task ",
		"server ", "bench CPU ", "CPU per call ", "verify: PASS"}
	for _, call := range want {
		lines = append(lines, call+" ")
	}
	for _, line := range lines {
		if !strings.Contains(text.String(), line) {
			t.Errorf("the printed report has no %q:\n%s", line, text.String())
		}
	}
	if got := strings.Contains(text.String(), " heartbeat "); got != rep.Heartbeat {
		t.Errorf("the printed report has a heartbeat row: %v, want %v:\n%s", got, rep.Heartbeat, text.String())
	}
	if _, err := json.Marshal(rep); err != nil {
		t.Error(err)
	}
}

// The verification fails a run whose server lost a task, leased one
// twice, or holds a task nobody enqueued, and names them; a double
// submit the workers saw fails it too.
func TestVerifyFindsWhatWentWrong(t *testing.T) {
	ctx := context.Background()
	s := testserver.Start(t, testserver.Options{})
	admin, _ := client.New(s.URL, client.WithKey(testserver.AdminKey))
	enqueue := func() string {
		t.Helper()
		task, err := admin.Enqueue(ctx, client.EnqueueRequest{Queue: benchQueue, Title: "t"})
		if err != nil {
			t.Fatal(err)
		}
		return task.ID
	}
	claimAndSubmit := func(submit bool) string {
		t.Helper()
		cl, _, err := admin.Claim(ctx, client.ClaimRequest{Queue: benchQueue, LeaseSeconds: 10})
		if err != nil || cl == nil {
			t.Fatalf("claim: %v", err)
		}
		if submit {
			if _, err := admin.Submit(ctx, cl.Task.ID, client.SubmitRequest{LeaseToken: cl.Lease.Token, Outcome: client.OutcomeSucceeded}); err != nil {
				t.Fatal(err)
			}
		}
		return cl.Task.ID
	}
	// done: claimed and submitted once, but the ledger says two submits.
	done := enqueue()
	claimAndSubmit(true)
	// lapsed: its first lease ran out, a second claim finished it.
	lapsed := enqueue()
	claimAndSubmit(false)
	s.Clock.Advance(11 * time.Second)
	// This claim notices the lapse and schedules the retry after its
	// backoff, so it finds nothing ready yet.
	if cl, _, err := admin.Claim(ctx, client.ClaimRequest{Queue: benchQueue}); err != nil || cl != nil {
		t.Fatalf("claim during the backoff: %v, %v", cl, err)
	}
	s.Clock.Advance(time.Minute)
	if id := claimAndSubmit(true); id != lapsed {
		t.Fatalf("reclaimed %s, want %s", id, lapsed)
	}
	stranger := enqueue() // made behind the workers' backs
	claimAndSubmit(true)
	lost := enqueue() // never claimed

	seen := map[string]taskSeen{
		done:   {enqueued: true, claims: 1, submits: 2},
		lapsed: {enqueued: true, claims: 1, submits: 1},
		lost:   {enqueued: true},
	}
	rep, err := verify(ctx, admin, seen, verifyOptions{recheckFor: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Pass {
		t.Fatalf("passed: %+v", rep)
	}
	if rep.Enqueued != 3 || rep.Succeeded != 2 || rep.Lost != 1 || rep.LostStates["ready"] != 1 ||
		rep.SubmittedTwice != 1 || rep.LeasedTwice != 1 || rep.Unacknowledged != 1 || rep.ServerListed != 4 || rep.RunsChecked != 4 {
		t.Errorf("report %+v", rep)
	}
	for kind, id := range map[string]string{"lost": lost, "submitted_twice": done, "leased_twice": lapsed, "unacknowledged": stranger} {
		if ids := rep.Examples[kind]; len(ids) != 1 || ids[0] != id {
			t.Errorf("%s examples %v, want [%s]", kind, ids, id)
		}
	}
	if len(rep.Problems) != 4 {
		t.Errorf("problems %q, want lost, submitted twice, leased twice, unacknowledged", rep.Problems)
	}

	// Now the workers saw nothing wrong and the run was a work-off that
	// --duration stopped: the never-claimed task is left, not lost, and
	// a failed enqueue explains the stranger; the second run of the
	// lapsed task is still a second lease.
	seen[done] = taskSeen{enqueued: true, claims: 1, submits: 1}
	rep, err = verify(ctx, admin, seen, verifyOptions{capped: true, unsure: 1, recheckFor: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Pass || rep.Left != 1 || rep.Lost != 0 || rep.Unacknowledged != 1 || rep.SubmittedTwice != 0 || rep.LeasedTwice != 1 || len(rep.Problems) != 1 {
		t.Errorf("capped run: %+v, want only the second lease as a problem", rep)
	}
}
