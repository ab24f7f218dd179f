package client_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/client"
	"github.com/tessera-dev/tessera/internal/testserver"
)

// claimWith claims one task of queue with caps (no waiting) and returns
// the claim, or nil and the empty answer's advice when none was granted.
func claimWith(t *testing.T, c *client.Client, queue string, caps ...string) (*client.Claim, time.Duration) {
	t.Helper()
	cl, empty, err := c.Claim(context.Background(), client.ClaimRequest{Queue: queue, LeaseSeconds: 60, Capabilities: caps})
	if err != nil {
		t.Fatalf("claim of %s with %v: %v", queue, caps, err)
	}
	if cl == nil {
		return nil, empty.RetryAfter
	}
	return cl, 0
}

// A task's requires and group go out on enqueue (single and batch) and
// come back on the task; a claim is granted only the tasks whose requires
// its capabilities cover, by Claim, ClaimN and WaitClaim alike.
func TestRequiresAndCapabilities(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	ctx := context.Background()
	c := newClient(t, srv.URL, testserver.AdminKey)

	task := ok(c.Enqueue(ctx, client.EnqueueRequest{Queue: "builds", Title: "gpu build", Requires: []string{"repo:foo", "gpu"}, Group: "tenant-a"}))
	if !slices.Equal(task.Requires, []string{"gpu", "repo:foo"}) || task.Group != "tenant-a" {
		t.Fatalf("enqueued: requires %v, group %q", task.Requires, task.Group)
	}
	if got := ok(c.GetTask(ctx, task.ID)); !slices.Equal(got.Requires, task.Requires) || got.Group != "tenant-a" {
		t.Fatalf("read back: requires %v, group %q", got.Requires, got.Group)
	}
	if _, err := c.Enqueue(ctx, client.EnqueueRequest{Title: "bad", Requires: []string{"GPU"}}); client.ErrorCode(err) != client.CodeInvalidRequest {
		t.Fatalf("a requirement out of [a-z0-9._:/-]: %v", err)
	}

	for _, caps := range [][]string{nil, {"gpu"}, {"repo:foo", "cpu"}} {
		if cl, _ := claimWith(t, c, "builds", caps...); cl != nil {
			t.Fatalf("capabilities %v were granted %s, which requires %v", caps, cl.Task.Title, cl.Task.Requires)
		}
	}
	cl, _ := claimWith(t, c, "builds", "repo:foo", "gpu", "extra")
	if cl == nil || cl.Task.ID != task.ID {
		t.Fatalf("a superset of the requires: %+v", cl)
	}

	batch := ok(c.EnqueueBatch(ctx, client.EnqueueBatchRequest{Tasks: []client.EnqueueRequest{
		{Queue: "builds", Title: "b-gpu", Requires: []string{"gpu"}, Group: "tenant-b"},
		{Queue: "builds", Title: "b-plain"},
	}}))
	if !slices.Equal(batch[0].Requires, []string{"gpu"}) || batch[0].Group != "tenant-b" || batch[1].Requires != nil || batch[1].Group != "" {
		t.Fatalf("batch: %+v", batch)
	}
	// No capabilities take only what requires nothing.
	claims, _, err := c.ClaimN(ctx, client.ClaimRequest{Queue: "builds", LeaseSeconds: 60}, 5)
	if err != nil || len(claims) != 1 || claims[0].Task.Title != "b-plain" {
		t.Fatalf("batch claim without capabilities: %+v, %v", claims, err)
	}
	got := ok(c.WaitClaimN(ctx, client.ClaimRequest{Queue: "builds", LeaseSeconds: 60, Capabilities: []string{"gpu"}}, 5))
	if len(got) != 1 || got[0].Task.Title != "b-gpu" {
		t.Fatalf("batch claim with gpu: %+v", got)
	}
}

// Work claims with its Capabilities: a worker that has them runs the task,
// and one that lacks them is never handed it.
func TestWorkClaimsWithCapabilities(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	ctx := context.Background()
	c := newClient(t, srv.URL, testserver.AdminKey)
	task := ok(c.Enqueue(ctx, client.EnqueueRequest{Queue: "fleet", Title: "needs a gpu", Requires: []string{"gpu"}}))

	var wrong atomic.Int32
	lacking, stop := context.WithCancel(ctx)
	defer stop()
	lackingDone := make(chan error, 1)
	go func() {
		lackingDone <- c.Work(lacking, "fleet", func(ctx context.Context, job *client.Job) (any, error) {
			wrong.Add(1)
			return nil, nil
		}, client.WorkOptions{Capabilities: []string{"cpu"}})
	}()

	var ran string
	err := c.Work(ctx, "fleet", func(ctx context.Context, job *client.Job) (any, error) {
		ran = job.Task.ID
		return "done", nil
	}, client.WorkOptions{Capabilities: []string{"gpu", "cpu"}, MaxTasks: 1})
	if err != nil || ran != task.ID {
		t.Fatalf("the capable worker: ran %q, %v", ran, err)
	}
	if got := ok(c.GetTask(ctx, task.ID)); got.State != client.StateSucceeded {
		t.Fatalf("the task: %s", got.State)
	}
	stop()
	if err := <-lackingDone; err != nil {
		t.Fatalf("the worker without gpu: %v", err)
	}
	if n := wrong.Load(); n != 0 {
		t.Fatalf("the worker without gpu ran %d task(s)", n)
	}
}

// Claims rotate across a queue's groups at equal priority: the group
// granted longest ago first, then the oldest task.
func TestClaimsRotateAcrossGroups(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	ctx := context.Background()
	c := newClient(t, srv.URL, testserver.AdminKey)
	for _, tk := range []struct{ title, group string }{{"a1", "a"}, {"a2", "a"}, {"a3", "a"}, {"b1", "b"}, {"b2", "b"}} {
		ok(c.Enqueue(ctx, client.EnqueueRequest{Queue: "q", Title: tk.title, Group: tk.group}))
		srv.Clock.Advance(time.Millisecond)
	}
	var order []string
	for range 5 {
		cl, _ := claimWith(t, c, "q")
		if cl == nil {
			t.Fatalf("claims ran out after %v", order)
		}
		order = append(order, cl.Task.Title)
	}
	if want := []string{"a1", "b1", "a2", "b2", "a3"}; !slices.Equal(order, want) {
		t.Fatalf("claim order %v, want %v", order, want)
	}
}

// A queue's settings and a group's round-trip, and show in the fleet
// view; group_max_running holds a group to its live leases, the group's
// own max_running overrides it, a rate answers an empty claim with when
// its next token is there.
func TestQueueAndGroupSettings(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	ctx := context.Background()
	c := newClient(t, srv.URL, testserver.AdminKey)

	f := ok(c.QueueFleet(ctx, "jobs"))
	if f.Queue != "jobs" || f.Namespace != "main" || f.GroupMaxRunning != 0 || f.Rate != nil || len(f.Groups)+len(f.Lanes)+len(f.Claimants) != 0 {
		t.Fatalf("a queue's fleet before anything: %+v", f)
	}
	qs := ok(c.SetQueueSettings(ctx, "jobs", client.QueueSettings{GroupMaxRunning: 1}))
	if qs.Queue != "jobs" || qs.GroupMaxRunning != 1 || qs.Rate != nil {
		t.Fatalf("queue settings: %+v", qs)
	}
	for _, title := range []string{"a1", "a2", "b1"} {
		ok(c.Enqueue(ctx, client.EnqueueRequest{Queue: "jobs", Title: title, Group: title[:1]}))
		srv.Clock.Advance(time.Millisecond)
	}
	a1, _ := claimWith(t, c, "jobs")
	b1, _ := claimWith(t, c, "jobs")
	if a1 == nil || b1 == nil || a1.Task.Title != "a1" || b1.Task.Title != "b1" {
		t.Fatalf("first claims: %+v, %+v", a1, b1)
	}
	if cl, _ := claimWith(t, c, "jobs"); cl != nil {
		t.Fatalf("group a is at its cap of 1, yet %s was granted", cl.Task.Title)
	}
	f = ok(c.QueueFleet(ctx, "jobs"))
	if f.GroupMaxRunning != 1 || len(f.Groups) != 2 || f.Groups[0].Group != "a" || f.Groups[0].Running != 1 || f.Groups[0].LastGrantedAt == nil {
		t.Fatalf("fleet with a capped group: %+v", f)
	}
	if len(f.Lanes) != 2 || f.Lanes[0].Group != "a" || f.Lanes[0].Ready != 1 || f.Lanes[0].Unmatched {
		t.Fatalf("lanes: %+v", f.Lanes)
	}

	// The group's own cap over the queue's.
	two := 2
	g := ok(c.SetGroupSettings(ctx, "jobs", client.GroupSettings{Group: "a", MaxRunning: &two}))
	if g.Group != "a" || g.MaxRunning == nil || *g.MaxRunning != 2 || g.Running != 1 {
		t.Fatalf("group settings: %+v", g)
	}
	if cl, _ := claimWith(t, c, "jobs"); cl == nil || cl.Task.Title != "a2" {
		t.Fatalf("with a's cap at 2: %+v", cl)
	}

	// A queue rate: its bucket spent, a claim gets nothing and is told
	// when the next token is there.
	qs = ok(c.SetQueueSettings(ctx, "jobs", client.QueueSettings{Rate: &client.Rate{PerSecond: 0.5, Burst: 1}}))
	if qs.GroupMaxRunning != 0 || qs.Rate == nil || qs.Rate.PerSecond != 0.5 || qs.Rate.Burst != 1 {
		t.Fatalf("settings replaced whole: %+v", qs)
	}
	for _, title := range []string{"r1", "r2"} {
		ok(c.Enqueue(ctx, client.EnqueueRequest{Queue: "jobs", Title: title}))
	}
	if cl, _ := claimWith(t, c, "jobs"); cl == nil || cl.Task.Title != "r1" {
		t.Fatalf("the bucket's one token: %+v", cl)
	}
	cl, retry := claimWith(t, c, "jobs")
	if cl != nil || retry != 2*time.Second {
		t.Fatalf("with the bucket spent: %+v, retry after %v, want 2s", cl, retry)
	}
	srv.Clock.Advance(2 * time.Second)
	if cl, _ := claimWith(t, c, "jobs"); cl == nil || cl.Task.Title != "r2" {
		t.Fatalf("once a token is there again: %+v", cl)
	}
	if f := ok(c.QueueFleet(ctx, "jobs")); f.Rate == nil || f.Rate.PerSecond != 0.5 || f.GroupMaxRunning != 0 {
		t.Fatalf("fleet after the rate: %+v", f.QueueSettings)
	}

	// A group's rate and cooldown, shown as set.
	until := srv.Clock.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	g = ok(c.SetGroupSettings(ctx, "jobs", client.GroupSettings{Group: "b", Rate: &client.Rate{PerSecond: 3}, CooldownUntil: &until}))
	if g.Rate == nil || g.Rate.PerSecond != 3 || g.Rate.Burst != 3 || g.CooldownUntil == nil || !g.CooldownUntil.Equal(until) || g.MaxRunning != nil {
		t.Fatalf("group b: %+v", g)
	}
	if _, err := c.SetQueueSettings(ctx, "jobs", client.QueueSettings{GroupMaxRunning: -1}); client.ErrorCode(err) != client.CodeInvalidRequest {
		t.Fatalf("a negative cap: %v", err)
	}
}

// A submit or a release may cool its task's group down: its ready tasks
// wait, the rest of the queue flows, and an empty claim says when the
// cooldown ends. A task without a group refuses a cooldown.
func TestCooldowns(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	ctx := context.Background()
	c := newClient(t, srv.URL, testserver.AdminKey)
	for _, title := range []string{"t1", "t2", "t3"} {
		ok(c.Enqueue(ctx, client.EnqueueRequest{Queue: "api", Title: title, Group: "tenant"}))
		srv.Clock.Advance(time.Millisecond)
	}
	plain := ok(c.Enqueue(ctx, client.EnqueueRequest{Queue: "api", Title: "plain"}))

	t1, _ := claimWith(t, c, "api")
	if t1 == nil || t1.Task.Title != "t1" {
		t.Fatalf("first claim: %+v", t1)
	}
	done := ok(c.Submit(ctx, t1.Task.ID, client.SubmitRequest{LeaseToken: t1.Lease.Token, Outcome: client.OutcomeFailed, Error: "429", CooldownSeconds: 30}))
	if done.State == client.StateLeased {
		t.Fatalf("submitted: %+v", done)
	}
	f := ok(c.QueueFleet(ctx, "api"))
	i := slices.IndexFunc(f.Groups, func(g client.GroupState) bool { return g.Group == "tenant" })
	if i < 0 || f.Groups[i].CooldownUntil == nil || f.Groups[i].CooldownUntil.Sub(srv.Clock.Now()) != 30*time.Second {
		t.Fatalf("the group after a cooldown: %+v", f.Groups)
	}
	// The group waits; the rest flows.
	if cl, _ := claimWith(t, c, "api"); cl == nil || cl.Task.ID != plain.ID {
		t.Fatalf("during the cooldown: %+v", cl)
	}
	if cl, retry := claimWith(t, c, "api"); cl != nil || retry != 30*time.Second {
		t.Fatalf("only the cooled group left: %+v, retry after %v, want 30s", cl, retry)
	}
	srv.Clock.Advance(30 * time.Second)

	// A release cools down too.
	t2, _ := claimWith(t, c, "api")
	if t2 == nil || t2.Task.Title != "t2" {
		t.Fatalf("after the cooldown: %+v", t2)
	}
	if got := ok(c.ReleaseWith(ctx, t2.Task.ID, client.ReleaseRequest{LeaseToken: t2.Lease.Token, CooldownSeconds: 5})); got.State != client.StateReady || got.Attempts != 0 {
		t.Fatalf("released: %+v", got)
	}
	if cl, retry := claimWith(t, c, "api"); cl != nil || retry != 5*time.Second {
		t.Fatalf("after a release's cooldown: %+v, %v", cl, retry)
	}
	srv.Clock.Advance(5 * time.Second)

	// And a batch submit's item.
	cl, _ := claimWith(t, c, "api")
	if cl == nil {
		t.Fatal("nothing after the release's cooldown")
	}
	res := ok(c.SubmitBatch(ctx, client.SubmitBatchRequest{Items: []client.SubmitItem{{TaskID: cl.Task.ID,
		SubmitRequest: client.SubmitRequest{LeaseToken: cl.Lease.Token, Outcome: client.OutcomeSucceeded, CooldownSeconds: 7}}}}))
	if res[0].Err != nil {
		t.Fatalf("batch submit with a cooldown: %v", res[0].Err)
	}
	if cl, retry := claimWith(t, c, "api"); cl != nil || retry != 7*time.Second {
		t.Fatalf("after a batch item's cooldown: %+v, %v", cl, retry)
	}

	// No group, no cooldown.
	lone := ok(c.Enqueue(ctx, client.EnqueueRequest{Queue: "solo", Title: "alone"}))
	lc, _ := claimWith(t, c, "solo")
	if lc == nil || lc.Task.ID != lone.ID {
		t.Fatalf("solo claim: %+v", lc)
	}
	_, err := c.Submit(ctx, lone.ID, client.SubmitRequest{LeaseToken: lc.Lease.Token, Outcome: client.OutcomeSucceeded, CooldownSeconds: 5})
	var e *client.Error
	if !asError(err, &e) || e.Code != client.CodeInvalidRequest || e.Details.Field != "cooldown_seconds" {
		t.Fatalf("a cooldown of a task without a group: %v", err)
	}
}

// A lane no claimant seen in the last 5 minutes could take shows as
// unmatched in the fleet view, beside the capability sets seen.
func TestUnmatchedLanes(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	ctx := context.Background()
	c := newClient(t, srv.URL, testserver.AdminKey)
	ok(c.Enqueue(ctx, client.EnqueueRequest{Queue: "ml", Title: "train", Requires: []string{"tpu"}}))
	ok(c.Enqueue(ctx, client.EnqueueRequest{Queue: "ml", Title: "infer", Requires: []string{"gpu"}}))
	claimWith(t, c, "ml", "cpu")
	srv.Clock.Advance(6 * time.Minute)
	claimWith(t, c, "ml", "gpu") // takes infer
	f := ok(c.QueueFleet(ctx, "ml"))
	if len(f.Claimants) != 2 {
		t.Fatalf("claimants: %+v", f.Claimants)
	}
	i := slices.IndexFunc(f.Lanes, func(l client.LaneState) bool { return slices.Equal(l.Requires, []string{"tpu"}) })
	if i < 0 {
		t.Fatalf("no tpu lane: %+v", f.Lanes)
	}
	l := f.Lanes[i]
	if l.Ready != 1 || !l.Unmatched || l.UnmatchedSeconds == nil || *l.UnmatchedSeconds < 360 || l.OldestReadyAgeSeconds == nil {
		t.Fatalf("the tpu lane: %+v", l)
	}
}
