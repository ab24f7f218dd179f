package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/client"
	"github.com/tessera-dev/tessera/internal/testserver"
)

// A person answers gates from the terminal: `tasks get` shows a gated
// task's gates, `tasks answer` answers them (a form's content checked
// against its schema), and `tail` prints the gate events as they happen.
func TestTasksAnswerShowsAndTailsGates(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	k := testserver.AdminKey
	ctx := context.Background()
	c, err := client.New(srv.URL, client.WithKey(k))
	if err != nil {
		t.Fatal(err)
	}
	task, err := c.Enqueue(ctx, client.EnqueueRequest{Queue: "deploy", Title: "ship", Gates: []client.GateSpec{
		{Key: "approve", Message: "Ship web to production?", TimeoutSeconds: 3600},
		{Key: "where", Message: "Which region?", Schema: map[string]any{"type": "object",
			"properties": map[string]any{"region": map[string]any{"type": "string", "enum": []string{"eu", "us"}}}, "required": []string{"region"}}},
	}})
	if err != nil || task.State != client.StateGated {
		t.Fatalf("enqueue with gates: %+v, %v", task, err)
	}
	opened := srv.Clock.Now().UTC()
	events := make(chan string, 1)
	go func() {
		out, _ := cli(t, srv.URL, k, "", "tail", "--after", task.ID, "--count", "3")
		events <- out
	}()

	out, _ := cli(t, srv.URL, k, "", "tasks", "get", task.ID)
	if got, want := field(out, "state"), "gated"; got != want {
		t.Errorf("state %q, want %q:\n%s", got, want, out)
	}
	until := opened.Add(time.Hour).Format(time.RFC3339)
	if got, want := field(out, "gate approve"), `approval open until `+until+` (then fail): "Ship web to production?"`; got != want {
		t.Errorf("gate approve:\n got %s\nwant %s", got, want)
	}
	if got, want := field(out, "gate where"), `form open: "Which region?"`; got != want {
		t.Errorf("gate where:\n got %s\nwant %s", got, want)
	}

	if _, code := cli(t, srv.URL, k, "", "tasks", "answer", task.ID, "where", "--content", `{"region":"mars"}`); code != exitUsage {
		t.Errorf("an answer off the schema: exit %d, want %d", code, exitUsage)
	}
	if _, code := cli(t, srv.URL, k, "", "tasks", "answer", task.ID, "nosuch"); code != exitNotFound {
		t.Errorf("an unknown gate: exit %d, want %d", code, exitNotFound)
	}
	if _, code := cli(t, srv.URL, k, "", "tasks", "answer", task.ID, "where", "--decline", "--content", `{}`); code != exitUsage {
		t.Errorf("--decline with --content: exit %d, want %d", code, exitUsage)
	}
	if out, code := cli(t, srv.URL, k, "", "tasks", "answer", task.ID, "approve"); code != exitOK || strings.Fields(out)[1] != "gated" {
		t.Errorf("approve: exit %d, %q; want the task still gated", code, out)
	}
	if _, code := cli(t, srv.URL, k, "", "tasks", "answer", task.ID, "approve", "--decline"); code != exitConflict {
		t.Errorf("a second answer: exit %d, want %d", code, exitConflict)
	}
	if out, code := cli(t, srv.URL, k, "", "tasks", "answer", task.ID, "where", "--content", `{"region":"eu"}`); code != exitOK || strings.TrimSpace(out) != task.ID+"  ready" {
		t.Errorf("the last answer: exit %d, %q; want the task ready", code, out)
	}

	me, err := c.Me(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out, _ = cli(t, srv.URL, k, "", "tasks", "get", task.ID)
	at := srv.Clock.Now().UTC().Format(time.RFC3339)
	if got, want := field(out, "gate where"), `form accept by `+me.Principal.ID+` at `+at+`: "Which region?"`; got != want {
		t.Errorf("answered gate where:\n got %s\nwant %s", got, want)
	}

	select {
	case out := <-events:
		lines := strings.Split(strings.TrimSpace(out), "\n")
		want := []string{"task.enqueued " + task.ID + " queue=deploy state=gated",
			"task.gate_answered " + task.ID + " queue=deploy state=gated",
			"task.gate_answered " + task.ID + " queue=deploy state=ready"}
		if len(lines) != 3 {
			t.Fatalf("tail printed %q", out)
		}
		for i, w := range want {
			if f := strings.Fields(lines[i]); len(f) < 5 || strings.Join(f[1:5], " ") != w {
				got := lines[i]
				t.Errorf("tail line %d: %q, want %q", i, got, w)
			}
		}
	case <-time.After(30 * time.Second):
		t.Fatal("tail printed no gate events")
	}
}
