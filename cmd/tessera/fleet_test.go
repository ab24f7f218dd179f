package main

import (
	"context"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/client"
	"github.com/tessera-dev/tessera/internal/testserver"
)

// A task enqueued with --requires and --group is run by `tessera work`
// with the --capability flags that cover it, while a worker without them
// is never handed it (though the fleet view shows it claiming).
func TestWorkRunsWhatItsCapabilitiesCover(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	k := testserver.AdminKey
	out, code := cli(t, srv.URL, k, "", "tasks", "enqueue", "--title", "build", "--queue", "builds",
		"--requires", "repo:foo", "--requires", "gpu", "--group", "tenant-a", "--json")
	var task client.Task
	if err := json.Unmarshal([]byte(out), &task); code != exitOK || err != nil ||
		!slices.Equal(task.Requires, []string{"gpu", "repo:foo"}) || task.Group != "tenant-a" {
		t.Fatalf("enqueue --requires --group: exit %d, %v\n%s", code, err, out)
	}
	if out, _ := cli(t, srv.URL, k, "", "tasks", "get", task.ID); !strings.Contains(out, "requires   gpu,repo:foo") || !strings.Contains(out, "group      tenant-a") {
		t.Fatalf("tasks get:\n%s", out)
	}

	// The worker without the capabilities claims and is handed nothing.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lacking := &lockedBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"work", "--queue", "builds", "--capability", "gpu", "--", "sh", "-c", "echo 1"}, io.Discard, lacking)
	}()
	c, err := client.New(srv.URL, client.WithKey(k))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		f, err := c.QueueFleet(context.Background(), "builds")
		if err == nil && slices.ContainsFunc(f.Claimants, func(cl client.Claimant) bool { return slices.Equal(cl.Capabilities, []string{"gpu"}) }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker with gpu alone was never seen claiming: %+v, %v\n%s", f, err, lacking.String())
		}
		time.Sleep(20 * time.Millisecond)
	}

	if _, code := cli(t, srv.URL, k, "", "work", "--queue", "builds", "--capability", "gpu,repo:foo", "--capability", "cpu", "--max-tasks", "1",
		"--", "sh", "-c", `echo '"built"'`); code != exitOK {
		t.Fatalf("work --capability: exit %d", code)
	}
	got, err := c.GetTask(context.Background(), task.ID)
	if err != nil || got.State != client.StateSucceeded || string(got.Result) != `"built"` {
		t.Fatalf("the task after work --capability: %+v, %v", got, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("the worker with gpu alone: %v", err)
	}
	if strings.Contains(lacking.String(), "task claimed") {
		t.Fatalf("the worker with gpu alone claimed a task:\n%s", lacking.String())
	}
}

// Settings set with `queues settings` and `queues group` read back from
// `queues settings`, `queues group` and `queues fleet`, as tables and as
// JSON; a rate is N/s, N/m or N/h.
func TestQueuesSettingsRoundTrip(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	k := testserver.AdminKey
	out, code := cli(t, srv.URL, k, "", "queues", "settings", "jobs", "--group-max-running", "2", "--rate", "300/m", "--burst", "10", "--json")
	var qs client.QueueSettings
	if err := json.Unmarshal([]byte(out), &qs); code != exitOK || err != nil || qs.Queue != "jobs" || qs.GroupMaxRunning != 2 ||
		qs.Rate == nil || qs.Rate.PerSecond != 5 || qs.Rate.Burst != 10 {
		t.Fatalf("queues settings --json: exit %d, %v\n%s", code, err, out)
	}
	want := "queue              jobs\ngroup_max_running  2\nrate               5/s burst 10\n"
	if out, _ := cli(t, srv.URL, k, "", "queues", "settings", "jobs"); out != want {
		t.Fatalf("queues settings without flags printed\n%q, want\n%q", out, want)
	}

	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	out, code = cli(t, srv.URL, k, "", "queues", "group", "jobs", "tenant-a", "--max-running", "1", "--rate", "2", "--cooldown-until", until.Format(time.RFC3339), "--json")
	var g client.GroupState
	if err := json.Unmarshal([]byte(out), &g); code != exitOK || err != nil || g.Group != "tenant-a" || g.MaxRunning == nil || *g.MaxRunning != 1 ||
		g.Rate == nil || g.Rate.PerSecond != 2 || g.Rate.Burst != 2 || g.CooldownUntil == nil || !g.CooldownUntil.Equal(until) {
		t.Fatalf("queues group --json: exit %d, %v\n%s", code, err, out)
	}
	if _, code := cli(t, srv.URL, k, "", "queues", "group", "jobs", "tenant-b", "--max-running", "0"); code != exitOK {
		t.Fatalf("queues group tenant-b: exit %d", code)
	}
	if _, code := cli(t, srv.URL, k, "", "tasks", "enqueue", "--title", "t", "--queue", "jobs", "--group", "tenant-a", "--requires", "gpu"); code != exitOK {
		t.Fatal("enqueue failed")
	}

	out, code = cli(t, srv.URL, k, "", "queues", "fleet", "jobs", "--json")
	var f client.Fleet
	if err := json.Unmarshal([]byte(out), &f); code != exitOK || err != nil || f.GroupMaxRunning != 2 || f.Rate == nil || f.Rate.PerSecond != 5 ||
		len(f.Groups) != 2 || f.Groups[0].Group != "tenant-a" || len(f.Lanes) != 1 || f.Lanes[0].Group != "tenant-a" {
		t.Fatalf("queues fleet --json: exit %d, %v\n%s", code, err, out)
	}
	out, _ = cli(t, srv.URL, k, "", "queues", "fleet", "jobs")
	for _, line := range []string{"group_max_running  2", "rate               5/s burst 10", "tenant-a  1            0        2/s burst 2",
		"tenant-b  no cap       0        -", "tenant-a    gpu       1"} {
		if !strings.Contains(out, line) {
			t.Errorf("queues fleet has no %q:\n%s", line, out)
		}
	}
	if out, _ := cli(t, srv.URL, k, "", "queues", "group", "jobs", "tenant-b"); !strings.Contains(out, "tenant-b  no cap") {
		t.Fatalf("queues group without flags:\n%s", out)
	}

	// Replaced whole: no rate now, and none shown.
	if out, _ := cli(t, srv.URL, k, "", "queues", "settings", "jobs", "--rate", "none"); out != "queue              jobs\ngroup_max_running  -\nrate               -\n" {
		t.Fatalf("queues settings --rate none:\n%q", out)
	}

	for _, args := range [][]string{
		{"queues", "settings"},
		{"queues", "settings", "jobs", "--rate", "5/x"},
		{"queues", "settings", "jobs", "--rate", "-1"},
		{"queues", "settings", "jobs", "--burst", "3"},
		{"queues", "settings", "jobs", "--group-max-running", "-1"},
		{"queues", "settings", "jobs", "--rate", "1000000/s"}, // 400 from the server
		{"queues", "group", "jobs"},
		{"queues", "group", "jobs", "a", "--cooldown-until", "tomorrow"},
		{"queues", "group", "jobs", "a", "--max-running", "-2"},
		{"queues", "bogus"},
		{"tasks", "enqueue", "--title", "x", "--requires", "GPU"}, // 400 from the server
	} {
		if _, code := cli(t, srv.URL, k, "", args...); code != exitUsage {
			t.Errorf("tessera %s: exit %d, want %d", strings.Join(args, " "), code, exitUsage)
		}
	}
}

// A command that exits 75 under `tessera work --cooldown` fails its run and
// pauses its task's group: the group's next task is held back (the fleet
// view shows the cooldown) while another group's is run.
func TestWorkCooldownOnExit75(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	k := testserver.AdminKey
	c, err := client.New(srv.URL, client.WithKey(k))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, g := range []string{"api", "api", "other"} {
		if _, err := c.Enqueue(ctx, client.EnqueueRequest{Queue: "calls", Title: g, Group: g}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	// The first task (api) exits 75; the second claim finds api cooling
	// down and runs other's, which succeeds.
	script := `if [ "$(cat)" = "null" ] && [ ! -e "$MARK" ]; then touch "$MARK"; exit 75; fi; echo '"ok"'`
	mark := t.TempDir() + "/mark"
	if _, code := cli(t, srv.URL, k, "", "work", "--queue", "calls", "--cooldown", "1h", "--max-tasks", "2",
		"--", "env", "MARK="+mark, "sh", "-c", script); code != exitOK {
		t.Fatalf("work --cooldown: exit %d", code)
	}
	f, err := c.QueueFleet(ctx, "calls")
	if err != nil {
		t.Fatal(err)
	}
	var api *client.GroupState
	for i := range f.Groups {
		if f.Groups[i].Group == "api" {
			api = &f.Groups[i]
		}
	}
	if api == nil || api.CooldownUntil == nil || api.CooldownUntil.Before(start.Add(59*time.Minute)) {
		t.Fatalf("api group after an exit 75 with --cooldown 1h: %+v", api)
	}
	tasks, err := c.ListTasks(ctx, client.TaskFilter{Queue: "calls"})
	if err != nil {
		t.Fatal(err)
	}
	states := map[string][]string{}
	for _, task := range tasks.Tasks {
		states[task.Group] = append(states[task.Group], task.State)
	}
	slices.Sort(states["api"])
	if !slices.Equal(states["api"], []string{"ready", "scheduled"}) || !slices.Equal(states["other"], []string{"succeeded"}) {
		t.Fatalf("states after the cooldown: %v, want api [ready scheduled] (the failed one backing off) and other [succeeded]", states)
	}
}
