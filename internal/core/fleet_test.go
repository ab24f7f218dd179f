package core_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// The fleet's claims (issue 31), on each backend: capability matching,
// the rotation across groups, group caps, rates and cooldowns.

func enqueueFleet(t *testing.T, svc *core.Service, a *auth.Actor, p core.EnqueueParams) *tessera.Task {
	t.Helper()
	if p.Queue == "" {
		p.Queue = "q"
	}
	task, err := svc.Enqueue(context.Background(), a, "main", p, "")
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// claimTitle claims once and returns the title granted ("" for none).
func claimTitle(t *testing.T, svc *core.Service, a *auth.Actor, caps ...string) (string, *core.Claimed) {
	t.Helper()
	c, err := svc.Claim(context.Background(), a, "main", core.ClaimParams{Queue: "q", Capabilities: caps})
	if err != nil {
		t.Fatal(err)
	}
	if c.Task == nil {
		return "", c
	}
	return c.Task.Title, c
}

func TestCapabilitiesMatchSubsets(t *testing.T) {
	for backend := range backends {
		t.Run(backend, func(t *testing.T) {
			svc, a, _ := service(t, backend)
			enqueueFleet(t, svc, a, core.EnqueueParams{Title: "gpu+repo", Requires: []string{"repo:foo", "gpu", "gpu"}, Priority: 3})
			enqueueFleet(t, svc, a, core.EnqueueParams{Title: "gpu", Requires: []string{"gpu"}, Priority: 2})
			enqueueFleet(t, svc, a, core.EnqueueParams{Title: "plain", Priority: 1})
			got := enqueueFleet(t, svc, a, core.EnqueueParams{Title: "tpu", Requires: []string{"tpu"}})
			if !slices.Equal(got.Requires, []string{"tpu"}) {
				t.Fatalf("requires = %v", got.Requires)
			}
			// No capabilities: only the task that requires nothing.
			if title, _ := claimTitle(t, svc, a); title != "plain" {
				t.Fatalf("no capabilities got %q, want plain", title)
			}
			if title, c := claimTitle(t, svc, a); title != "" || c.RetryAfter == 0 {
				t.Fatalf("no capabilities again got %q (%+v), want nothing", title, c)
			}
			// A superset takes both gpu tasks, by priority; gpu alone not
			// the one that also needs the repository.
			if title, _ := claimTitle(t, svc, a, "gpu"); title != "gpu" {
				t.Fatalf("gpu got %q, want gpu", title)
			}
			if title, _ := claimTitle(t, svc, a, "gpu"); title != "" {
				t.Fatalf("gpu again got %q, want nothing", title)
			}
			if title, _ := claimTitle(t, svc, a, "gpu", "repo:foo", "tpu"); title != "gpu+repo" {
				t.Fatalf("gpu+repo:foo+tpu got %q, want gpu+repo", title)
			}
			// Exact.
			if title, _ := claimTitle(t, svc, a, "tpu"); title != "tpu" {
				t.Fatalf("tpu got %q, want tpu", title)
			}
		})
	}
}

// The scenario at W=1: a group with 10,000 ready tasks enqueued
// first and nine groups with 10 each; claims rotate across the groups
// with ready work, so the nine small groups' 90 tasks are granted within
// the first 100 claims, in an exact order. The big group is 1,000 here
// on PostgreSQL to keep the suite short; the order is the same.
func TestClaimsRotateAcrossGroups(t *testing.T) {
	for backend := range backends {
		t.Run(backend, func(t *testing.T) {
			svc, a, clock := service(t, backend)
			ctx := context.Background()
			big := 10_000
			if backend == "postgres" {
				big = 1_000
			}
			var batch []core.EnqueueParams
			for i := range big {
				batch = append(batch, core.EnqueueParams{Queue: "q", Title: fmt.Sprint("hot-", i), Group: "hot"})
				if len(batch) == core.MaxBatchTasks || i == big-1 {
					if _, err := svc.EnqueueBatch(ctx, a, "main", batch, ""); err != nil {
						t.Fatal(err)
					}
					batch = nil
				}
			}
			clock.Advance(time.Millisecond)
			for g := 1; g <= 9; g++ {
				for i := range 10 {
					batch = append(batch, core.EnqueueParams{Queue: "q", Title: fmt.Sprintf("g%d-%d", g, i), Group: fmt.Sprint("g", g)})
				}
			}
			if _, err := svc.EnqueueBatch(ctx, a, "main", batch, ""); err != nil {
				t.Fatal(err)
			}
			// An urgent task of the hot group: priority wins across groups.
			enqueueFleet(t, svc, a, core.EnqueueParams{Title: "urgent", Group: "hot", Priority: 5})
			var want []string
			want = append(want, "urgent")
			// After urgent, hot was granted last: g1..g9 (never granted,
			// oldest first), then hot, and so on, one of each a round.
			for round := range 10 {
				for g := 1; g <= 9; g++ {
					want = append(want, fmt.Sprintf("g%d-%d", g, round))
				}
				want = append(want, fmt.Sprint("hot-", round))
			}
			var got []string
			for range len(want) {
				title, _ := claimTitle(t, svc, a)
				got = append(got, title)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("grant order:\n got %v\nwant %v", got, want)
			}
			// Then only the hot group is left.
			if title, _ := claimTitle(t, svc, a); title != "hot-10" {
				t.Fatalf("after the small groups got %q, want hot-10", title)
			}
		})
	}
}

// A batch claim rotates as single claims do.
func TestBatchClaimRotatesAcrossGroups(t *testing.T) {
	svc, a, _ := service(t, "sqlite")
	for _, g := range []string{"a", "a", "a", "b", "b", "c"} {
		enqueueFleet(t, svc, a, core.EnqueueParams{Title: g, Group: g})
	}
	got, err := svc.ClaimN(context.Background(), a, "main", core.ClaimBatchParams{ClaimParams: core.ClaimParams{Queue: "q"}, Max: 6})
	if err != nil {
		t.Fatal(err)
	}
	var titles []string
	for _, c := range got.Claims {
		titles = append(titles, c.Task.Title)
	}
	if want := []string{"a", "b", "c", "a", "b", "a"}; !slices.Equal(titles, want) {
		t.Fatalf("batch grant order %v, want %v", titles, want)
	}
}

func TestGroupCapAndOverride(t *testing.T) {
	for backend := range backends {
		t.Run(backend, func(t *testing.T) {
			svc, a, clock := service(t, backend)
			ctx := context.Background()
			if _, err := svc.SetQueueSettings(ctx, a, "main", "q", core.QueueSettingsParams{GroupMaxRunning: 2}); err != nil {
				t.Fatal(err)
			}
			one := 1
			if _, err := svc.SetGroupSettings(ctx, a, "main", "q", core.GroupSettingsParams{Group: "b", MaxRunning: &one}); err != nil {
				t.Fatal(err)
			}
			for range 4 {
				enqueueFleet(t, svc, a, core.EnqueueParams{Title: "a", Group: "a"})
				enqueueFleet(t, svc, a, core.EnqueueParams{Title: "b", Group: "b"})
			}
			enqueueFleet(t, svc, a, core.EnqueueParams{Title: "plain"})
			var got []string
			var held []*core.Claimed
			for {
				title, c := claimTitle(t, svc, a)
				if title == "" {
					break
				}
				got = append(got, title)
				held = append(held, c)
			}
			sort.Strings(got)
			if want := []string{"a", "a", "b", "plain"}; !slices.Equal(got, want) {
				t.Fatalf("granted %v under caps a=2 (queue) b=1 (override), want %v", got, want)
			}
			f, err := svc.QueueFleet(ctx, a, "main", "q")
			if err != nil {
				t.Fatal(err)
			}
			running := map[string]int{}
			for _, g := range f.Groups {
				running[g.Group] = g.Running
			}
			if running["a"] != 2 || running["b"] != 1 {
				t.Fatalf("fleet view running %v, want a=2 b=1", running)
			}
			// An ended lease frees its slot at once.
			for _, c := range held {
				if c.Task.Group == "a" {
					if _, err := svc.Submit(ctx, a, "main", c.Task.ID, core.SubmitParams{LeaseToken: c.Lease.Token, Outcome: tessera.OutcomeSucceeded}, ""); err != nil {
						t.Fatal(err)
					}
					break
				}
			}
			if title, _ := claimTitle(t, svc, a); title != "a" {
				t.Fatalf("after a submit got %q, want a", title)
			}
			// A lapsed lease frees it too, before anyone notices the lapse.
			clock.Advance(time.Duration(core.DefaultLeaseSeconds+1) * time.Second)
			var after []string
			for {
				title, _ := claimTitle(t, svc, a)
				if title == "" {
					break
				}
				after = append(after, title)
			}
			sort.Strings(after)
			if want := []string{"a", "b"}; !slices.Equal(after, want) { // a2 and a3 lapsed into their backoff
				t.Fatalf("after every lease lapsed granted %v, want %v", after, want)
			}
		})
	}
}

// The cap holds under 16 concurrent claimants — on SQLite, and on two
// PostgreSQL nodes — as checked from the runs' intervals in the store.
func TestGroupCapHoldsUnderConcurrentClaims(t *testing.T) {
	const claimants, capN, tasks = 16, 3, 60
	for name, n := range map[string]int{"sqlite": 1, "postgres": 2} {
		t.Run(fmt.Sprintf("%s %d nodes", name, n), func(t *testing.T) {
			ctx := context.Background()
			ns := openNodes(t, name, n)
			svcs := make([]*core.Service, len(ns))
			actors := make([]*auth.Actor, len(ns))
			for i, n := range ns {
				svcs[i], actors[i] = n.svc, n.actor
			}
			if _, err := svcs[0].SetQueueSettings(ctx, actors[0], "main", "q", core.QueueSettingsParams{GroupMaxRunning: capN}); err != nil {
				t.Fatal(err)
			}
			var batch []core.EnqueueParams
			for i := range tasks {
				batch = append(batch, core.EnqueueParams{Queue: "q", Title: fmt.Sprint(i), Group: []string{"x", "y"}[i%2]})
			}
			if _, err := svcs[0].EnqueueBatch(ctx, actors[0], "main", batch, ""); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			errs := make(chan error, claimants)
			for w := range claimants {
				wg.Add(1)
				go func() {
					defer wg.Done()
					svc, a := svcs[w%len(svcs)], actors[w%len(svcs)]
					for {
						c, err := svc.Claim(ctx, a, "main", core.ClaimParams{Queue: "q", WaitSeconds: 1})
						if err != nil {
							errs <- err
							return
						}
						if c.Task == nil {
							return
						}
						time.Sleep(2 * time.Millisecond)
						if _, err := svc.Submit(ctx, a, "main", c.Task.ID, core.SubmitParams{LeaseToken: c.Lease.Token, Outcome: tessera.OutcomeSucceeded}, ""); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			// Every run's interval, by group: at no instant more than the
			// cap at once. An interval is [start, end); ends sort first.
			type edge struct {
				at    time.Time
				delta int
			}
			edges := map[string][]edge{}
			done := 0
			err := ns[0].db.View(ctx, func(tx store.Tx) error {
				list, err := tx.TaskList(ctx, "main", store.TaskFilter{Queue: "q", Limit: 1000})
				if err != nil {
					return err
				}
				for _, task := range list {
					if task.State == tessera.StateSucceeded {
						done++
					}
					runs, err := tx.RunList(ctx, "main", task.ID)
					if err != nil {
						return err
					}
					for _, r := range runs {
						if r.EndedAt == nil {
							return fmt.Errorf("run %s of %s has not ended", r.ID, task.ID)
						}
						edges[task.Group] = append(edges[task.Group], edge{r.StartedAt, 1}, edge{*r.EndedAt, -1})
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if done != tasks {
				t.Fatalf("%d tasks succeeded, want %d", done, tasks)
			}
			for g, es := range edges {
				sort.Slice(es, func(i, j int) bool {
					if !es[i].at.Equal(es[j].at) {
						return es[i].at.Before(es[j].at)
					}
					return es[i].delta < es[j].delta
				})
				n, most := 0, 0
				for _, e := range es {
					n += e.delta
					most = max(most, n)
				}
				if most > capN {
					t.Errorf("group %s held %d leases at once, over its cap of %d", g, most, capN)
				}
				if most != capN {
					t.Logf("group %s peaked at %d of %d", g, most, capN)
				}
			}
		})
	}
}

// A rate is exact to the token at a fixed clock: a burst, then one token
// per 1/per_second, and the empty claim's retry_after says when.
func TestRateLimitsQueueAndGroup(t *testing.T) {
	for backend := range backends {
		t.Run(backend, func(t *testing.T) {
			svc, a, clock := service(t, backend)
			ctx := context.Background()
			for i := range 20 {
				enqueueFleet(t, svc, a, core.EnqueueParams{Title: fmt.Sprint("slow-", i), Group: "slow"})
				enqueueFleet(t, svc, a, core.EnqueueParams{Title: fmt.Sprint("fast-", i), Group: "fast"})
			}
			if _, err := svc.SetGroupSettings(ctx, a, "main", "q", core.GroupSettingsParams{Group: "slow", Rate: &core.Rate{PerSecond: 0.5, Burst: 2}}); err != nil {
				t.Fatal(err)
			}
			count := func(n int) map[string]int {
				got := map[string]int{}
				for range n {
					title, _ := claimTitle(t, svc, a)
					got[strings.Split(title, "-")[0]]++
				}
				return got
			}
			// Six claims: slow's burst of 2, and fast takes the rest.
			if got := count(6); got["slow"] != 2 || got["fast"] != 4 {
				t.Fatalf("first six claims %v, want slow 2 fast 4", got)
			}
			// 1.9 s later slow has 0.95 of a token: none; 2 s, one.
			clock.Advance(1900 * time.Millisecond)
			if got := count(2); got["slow"] != 0 {
				t.Fatalf("at 1.9 s %v, want no slow", got)
			}
			clock.Advance(100 * time.Millisecond)
			if got := count(2); got["slow"] != 1 {
				t.Fatalf("at 2 s %v, want one slow", got)
			}
			// A queue rate: 2 a second, burst 3; the empty claim says when.
			if _, err := svc.SetQueueSettings(ctx, a, "main", "q", core.QueueSettingsParams{Rate: &core.Rate{PerSecond: 2, Burst: 3}}); err != nil {
				t.Fatal(err)
			}
			if got := count(3); got[""] != 0 {
				t.Fatalf("queue burst of 3: %v", got)
			}
			title, c := claimTitle(t, svc, a)
			if title != "" || c.RetryAfter != 1 {
				t.Fatalf("over the queue's rate got %q retry_after %d, want nothing and 1", title, c.RetryAfter)
			}
			clock.Advance(500 * time.Millisecond)
			if title, _ := claimTitle(t, svc, a); title == "" {
				t.Fatal("a token after 0.5 s at 2/s: want a grant")
			}
			if title, _ := claimTitle(t, svc, a); title != "" {
				t.Fatalf("got %q with the bucket spent", title)
			}
		})
	}
}

// A cooldown asked at a run's end holds the group's ready tasks until it
// ends; the rest of the queue flows.
func TestCooldownHoldsAGroup(t *testing.T) {
	for backend := range backends {
		t.Run(backend, func(t *testing.T) {
			svc, a, clock := service(t, backend)
			ctx := context.Background()
			for range 3 {
				enqueueFleet(t, svc, a, core.EnqueueParams{Title: "api", Group: "api"})
			}
			enqueueFleet(t, svc, a, core.EnqueueParams{Title: "other", Group: "other"})
			enqueueFleet(t, svc, a, core.EnqueueParams{Title: "plain"})
			title, c := claimTitle(t, svc, a)
			if title != "api" {
				t.Fatalf("first claim %q", title)
			}
			if _, err := svc.Submit(ctx, a, "main", c.Task.ID, core.SubmitParams{LeaseToken: c.Lease.Token, Outcome: tessera.OutcomeFailed,
				Error: "upstream 429", CooldownSeconds: 30}, ""); err != nil {
				t.Fatal(err)
			}
			var got []string
			var plain *core.Claimed
			for {
				title, c := claimTitle(t, svc, a)
				if title == "" {
					if c.RetryAfter != 30 {
						t.Fatalf("empty claim during the cooldown says retry_after %d, want 30", c.RetryAfter)
					}
					break
				}
				if title == "plain" {
					plain = c
				}
				got = append(got, title)
			}
			if want := []string{"other", "plain"}; !slices.Equal(got, want) {
				t.Fatalf("during the cooldown granted %v, want %v", got, want)
			}
			// A task without a group has none to cool down.
			_, err := svc.Release(ctx, a, "main", plain.Task.ID, core.ReleaseParams{LeaseToken: plain.Lease.Token, CooldownSeconds: 5})
			if tessera.ErrorCode(err) != tessera.CodeInvalidRequest {
				t.Fatalf("cooldown of a task with no group: %v, want invalid_request", err)
			}
			clock.Advance(30 * time.Second)
			if title, _ := claimTitle(t, svc, a); title != "api" {
				t.Fatalf("after the cooldown got %q, want api", title)
			}
		})
	}
}

// A long-poll is woken by an enqueue it can take, not by one it cannot.
func TestCapableLongPollWakesOnlyForItsWork(t *testing.T) {
	svc, a, _ := service(t, "sqlite")
	ctx := context.Background()
	type result struct {
		c   *core.Claimed
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	go func() {
		c, err := svc.Claim(ctx, a, "main", core.ClaimParams{Queue: "q", Capabilities: []string{"gpu"}, WaitSeconds: 20})
		done <- result{c, err, time.Now()}
	}()
	time.Sleep(100 * time.Millisecond)
	enqueueFleet(t, svc, a, core.EnqueueParams{Title: "tpu", Requires: []string{"tpu"}})
	select {
	case r := <-done:
		t.Fatalf("woken by work it cannot take: %+v %v", r.c, r.err)
	case <-time.After(300 * time.Millisecond):
	}
	enqueueFleet(t, svc, a, core.EnqueueParams{Title: "gpu", Requires: []string{"gpu"}})
	select {
	case r := <-done:
		if r.err != nil || r.c.Task == nil || r.c.Task.Title != "gpu" {
			t.Fatalf("woken with %+v %v, want the gpu task", r.c, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("not woken by work it can take")
	}
}

// Lanes no claimant seen lately could take show as unmatched, with for
// how long.
func TestUnmatchedLanesShow(t *testing.T) {
	svc, a, clock := service(t, "sqlite")
	ctx := context.Background()
	enqueueFleet(t, svc, a, core.EnqueueParams{Title: "gpu", Requires: []string{"gpu"}, Group: "t1"})
	enqueueFleet(t, svc, a, core.EnqueueParams{Title: "gpu", Requires: []string{"gpu"}, Group: "t1"})
	enqueueFleet(t, svc, a, core.EnqueueParams{Title: "cpu", Requires: []string{"cpu"}})
	if title, _ := claimTitle(t, svc, a, "cpu"); title != "cpu" {
		t.Fatalf("cpu claim got %q", title)
	}
	enqueueFleet(t, svc, a, core.EnqueueParams{Title: "cpu", Requires: []string{"cpu"}})
	clock.Advance(4 * time.Minute)
	f, err := svc.QueueFleet(ctx, a, "main", "q")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range f.Lanes {
		if l.Unmatched {
			t.Fatalf("lane %+v unmatched after 4 minutes, under UnmatchedAfter", l)
		}
	}
	clock.Advance(3 * time.Minute)
	f, err = svc.QueueFleet(ctx, a, "main", "q")
	if err != nil {
		t.Fatal(err)
	}
	lanes := map[string]core.LaneState{}
	for _, l := range f.Lanes {
		lanes[l.Group+"/"+strings.Join(l.Requires, ",")] = l
	}
	gpu, cpu := lanes["t1/gpu"], lanes["/cpu"]
	if gpu.Ready != 2 || !gpu.Unmatched || gpu.UnmatchedSeconds == nil || *gpu.UnmatchedSeconds != 420 {
		t.Fatalf("gpu lane %+v, want 2 ready, unmatched for 420 s", gpu)
	}
	if cpu.Ready != 1 || !cpu.Unmatched || *cpu.UnmatchedSeconds != 420 {
		t.Fatalf("cpu lane %+v, want 1 ready, unmatched 420 s (its claimant was seen 7 minutes ago)", cpu)
	}
	if title, _ := claimTitle(t, svc, a, "cpu", "gpu"); title != "gpu" {
		t.Fatalf("got %q", title)
	}
	f, err = svc.QueueFleet(ctx, a, "main", "q")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range f.Lanes {
		if l.Unmatched {
			t.Fatalf("lane %+v unmatched right after a claimant that covers it", l)
		}
	}
	if len(f.Claimants) != 2 {
		t.Fatalf("claimants %+v, want cpu and cpu+gpu", f.Claimants)
	}
}

// BenchmarkClaimBesideUnmatched measures a claim's latency (p50, p99)
// in a queue with 0 and with 100,000 ready tasks the claimant cannot
// take: the claim seeks the lanes it can take, so the two should match.
//
//	go test -run '^$' -bench ClaimBesideUnmatched -benchtime 2000x ./internal/core/
func BenchmarkClaimBesideUnmatched(b *testing.B) {
	for _, unmatched := range []int{0, 100_000} {
		b.Run(fmt.Sprint("unmatched=", unmatched), func(b *testing.B) {
			ctx := context.Background()
			n := openNodes(b, "sqlite", 1)[0]
			for done := 0; done < unmatched; done += core.MaxBatchTasks {
				batch := make([]core.EnqueueParams, core.MaxBatchTasks)
				for i := range batch {
					batch[i] = core.EnqueueParams{Title: "needs a tpu", Queue: "q", Requires: []string{"tpu"}}
				}
				if _, err := n.svc.EnqueueBatch(ctx, n.actor, "main", batch, ""); err != nil {
					b.Fatal(err)
				}
			}
			caps := []string{"gpu"}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				if _, err := n.svc.Enqueue(ctx, n.actor, "main", core.EnqueueParams{Title: "needs a gpu", Queue: "q", Requires: caps}, ""); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				start := time.Now()
				c, err := n.svc.Claim(ctx, n.actor, "main", core.ClaimParams{Queue: "q", Capabilities: caps})
				lat = append(lat, time.Since(start))
				if err != nil || c.Task == nil {
					b.Fatal(c, err)
				}
				b.StopTimer()
				if _, err := n.svc.Submit(ctx, n.actor, "main", c.Task.ID, core.SubmitParams{LeaseToken: c.Lease.Token, Outcome: "succeeded"}, ""); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50_µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99_µs")
		})
	}
}

// BenchmarkFairnessUnderLoad runs 16 workers against one queue of 10
// groups, one hot (10,000 ready tasks, the nine others 1,000 each), and
// logs the share of the grants each group got in each second: with the
// rotation every group with ready work gets about a tenth.
//
//	go test -run '^$' -bench FairnessUnderLoad -benchtime 1x -v ./internal/core/
func BenchmarkFairnessUnderLoad(b *testing.B) {
	const workers, seconds = 16, 4
	for range b.N {
		ctx := context.Background()
		n := openNodes(b, "sqlite", 1)[0]
		groups := []string{"hot"}
		for g := 1; g <= 9; g++ {
			groups = append(groups, fmt.Sprint("g", g))
		}
		for _, g := range groups {
			count := 1000
			if g == "hot" {
				count = 10_000
			}
			for done := 0; done < count; done += core.MaxBatchTasks {
				batch := make([]core.EnqueueParams, core.MaxBatchTasks)
				for i := range batch {
					batch[i] = core.EnqueueParams{Title: g, Queue: "q", Group: g}
				}
				if _, err := n.svc.EnqueueBatch(ctx, n.actor, "main", batch, ""); err != nil {
					b.Fatal(err)
				}
			}
		}
		var mu sync.Mutex
		share := make([]map[string]int, seconds)
		for i := range share {
			share[i] = map[string]int{}
		}
		start := time.Now()
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					sec := int(time.Since(start) / time.Second)
					if sec >= seconds {
						return
					}
					c, err := n.svc.Claim(ctx, n.actor, "main", core.ClaimParams{Queue: "q"})
					if err != nil || c.Task == nil {
						b.Error(c, err)
						return
					}
					mu.Lock()
					share[sec][c.Task.Group]++
					mu.Unlock()
					if _, err := n.svc.Submit(ctx, n.actor, "main", c.Task.ID, core.SubmitParams{LeaseToken: c.Lease.Token, Outcome: "succeeded"}, ""); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		for sec, m := range share {
			total := 0
			for _, c := range m {
				total += c
			}
			line := fmt.Sprintf("second %d: %4d grants:", sec+1, total)
			for _, g := range groups {
				line += fmt.Sprintf(" %s %4.1f%%", g, 100*float64(m[g])/float64(max(total, 1)))
			}
			b.Log(line)
		}
	}
}

// Rates hold for the cluster: 16 claimants through two PostgreSQL nodes
// get exactly a burst's worth of tasks from a queue whose rate refills
// too slowly to matter, and exactly a group's burst from a limited group.
func TestRatesHoldAcrossNodes(t *testing.T) {
	ctx := context.Background()
	ns := openNodes(t, "postgres", 2)
	first := ns[0]
	slow := &core.Rate{PerSecond: 0.001, Burst: 5}
	if _, err := first.svc.SetGroupSettings(ctx, first.actor, "main", "q", core.GroupSettingsParams{Group: "limited", Rate: slow}); err != nil {
		t.Fatal(err)
	}
	if _, err := first.svc.SetQueueSettings(ctx, first.actor, "main", "r", core.QueueSettingsParams{Rate: slow}); err != nil {
		t.Fatal(err)
	}
	var batch []core.EnqueueParams
	for i := range 40 {
		batch = append(batch, core.EnqueueParams{Queue: "q", Title: "limited", Group: "limited"},
			core.EnqueueParams{Queue: "r", Title: fmt.Sprint("r", i)})
	}
	if _, err := first.svc.EnqueueBatch(ctx, first.actor, "main", batch, ""); err != nil {
		t.Fatal(err)
	}
	for _, queue := range []string{"q", "r"} {
		var mu sync.Mutex
		granted := 0
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n := ns[w%2]
				for {
					c, err := n.svc.Claim(ctx, n.actor, "main", core.ClaimParams{Queue: queue})
					if err != nil {
						t.Error(err)
						return
					}
					if c.Task == nil {
						return
					}
					mu.Lock()
					granted++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if granted != slow.Burst {
			t.Errorf("queue %s: %d granted through two nodes, want the burst of %d", queue, granted, slow.Burst)
		}
	}
}
