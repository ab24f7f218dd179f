package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/client"
	"github.com/tessera-dev/tessera/internal/testserver"
)

// What `tessera tasks get`, `tasks graph` and `counts` show of a task in
// the middle of its life: the lease and when it expires, the lease once
// it lapsed (before any claim noticed), what a child waits on, and the
// checkpoint a run left.
func TestTasksGetShowsLeaseDependencyAndCheckpoint(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	k := testserver.AdminKey
	ctx := context.Background()
	c, err := client.New(srv.URL, client.WithKey(k))
	if err != nil {
		t.Fatal(err)
	}
	parent, err := c.Enqueue(ctx, client.EnqueueRequest{Queue: "show", Title: "parent"})
	if err != nil {
		t.Fatal(err)
	}
	child, err := c.Enqueue(ctx, client.EnqueueRequest{Queue: "show", Title: "child", After: []string{parent.ID}})
	if err != nil {
		t.Fatal(err)
	}
	cl, _, err := c.Claim(ctx, client.ClaimRequest{Queue: "show", LeaseSeconds: 30})
	if err != nil || cl == nil || cl.Task.ID != parent.ID {
		t.Fatalf("claim: %+v, %v", cl, err)
	}
	if _, err := c.Heartbeat(ctx, parent.ID, client.HeartbeatRequest{LeaseToken: cl.Lease.Token, Checkpoint: json.RawMessage(`{"page":7}`)}); err != nil {
		t.Fatal(err)
	}
	expires := cl.Lease.ExpiresAt.UTC().Format(time.RFC3339)

	out, _ := cli(t, srv.URL, k, "", "tasks", "get", parent.ID)
	if field(out, "state") != "leased" || !strings.HasPrefix(field(out, "lease"), "run "+cl.Lease.RunID) ||
		!strings.HasSuffix(field(out, "lease"), "expires "+expires) || !strings.HasPrefix(field(out, "checkpoint"), `{"page":7} (attempt 1`) {
		t.Errorf("tasks get of the leased parent lacks its lease or checkpoint:\n%s", out)
	}
	if strings.Contains(out, "lapsed") {
		t.Errorf("a live lease shown lapsed:\n%s", out)
	}
	out, _ = cli(t, srv.URL, k, "", "tasks", "get", child.ID)
	if field(out, "waits on") != "1 of 1 (on a parent's failure: cancel)" || field(out, "after") != parent.ID {
		t.Errorf("tasks get of the child lacks what it waits on:\n%s", out)
	}
	if out, _ = cli(t, srv.URL, k, "", "tasks", "graph", parent.ID); !strings.Contains(out, "waits on 1") {
		t.Errorf("tasks graph lacks how many parents the child waits on:\n%s", out)
	}

	// Past its expiry, before a claim notices: still leased, told lapsed.
	srv.Clock.Advance(31 * time.Second)
	out, _ = cli(t, srv.URL, k, "", "tasks", "get", parent.ID)
	if field(out, "state") != "leased" || !strings.Contains(field(out, "lease"), "expires "+expires+" (lapsed") {
		t.Errorf("tasks get of a lapsed lease:\n%s", out)
	}
	got, err := c.GetTask(ctx, parent.ID)
	if err != nil || !got.LeaseLapsed || got.Lease == nil {
		t.Errorf("GET /v1/tasks/{id} of a lapsed lease: %+v, %v; want lease_lapsed with the lease", got, err)
	}
	out, _ = cli(t, srv.URL, k, "", "counts")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "QUEUE WAITING GATED SCHEDULED READY LEASED LAPSED PAUSED SUCCEEDED DEAD CANCELED" ||
		strings.Join(strings.Fields(lines[1]), " ") != "show 1 0 0 0 0 1 0 0 0 0" {
		t.Fatalf("counts:\n%s", out)
	}
	counts, err := c.Counts(ctx)
	if err != nil || counts["show"]["lapsed"] != 1 || counts["show"]["leased"] != 0 || counts["show"]["waiting"] != 1 {
		t.Errorf("counts of the queue: %v, %v; want 1 lapsed, none leased, 1 waiting", counts["show"], err)
	}
	// A claim notices: the lease ends, the task backs off.
	if _, _, err := c.Claim(ctx, client.ClaimRequest{Queue: "show"}); err != nil {
		t.Fatal(err)
	}
	if got, err := c.GetTask(ctx, parent.ID); err != nil || got.LeaseLapsed || got.State != client.StateScheduled {
		t.Errorf("after a claim noticed the lapse: %s lapsed %t, %v; want scheduled (backing off)", got.State, got.LeaseLapsed, err)
	}
}

// field is the value of a `tasks get` line: what follows its key.
func field(out, key string) string {
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, key+"  "); ok {
			return strings.TrimSpace(rest)
		}
	}
	return ""
}
