package runner_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/client"
	"github.com/tessera-dev/tessera/internal/runner"
	"github.com/tessera-dev/tessera/internal/testserver"
)

// Each test runs the real runner against a real server, with real child
// processes (sh), and ends by checking that no task is left leased.

type harness struct {
	t   *testing.T
	srv *testserver.Server
	c   *client.Client
}

func newHarness(t *testing.T) *harness {
	srv := testserver.Start(t, testserver.Options{})
	c, err := client.New(srv.URL, client.WithKey(testserver.AdminKey))
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, srv: srv, c: c}
}

func (h *harness) enqueue(payload any, maxAttempts int) *client.Task {
	h.t.Helper()
	task, err := h.c.Enqueue(context.Background(), client.EnqueueRequest{Queue: "work", Title: "run it", Payload: payload, MaxAttempts: maxAttempts})
	if err != nil {
		h.t.Fatal(err)
	}
	return task
}

func (h *harness) task(id string) *client.Task {
	h.t.Helper()
	task, err := h.c.GetTask(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return task
}

// run runs the runner over script until it ran n tasks, or until stop is
// closed; it returns what the commands wrote to stderr.
func (h *harness) run(n int, script string, stop <-chan struct{}) string {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	var stderr bytes.Buffer
	err := runner.Run(ctx, runner.Config{Client: h.c, Queue: "work", Concurrency: 2, LeaseSeconds: 60, MaxTasks: n,
		Drain: 5 * time.Second, Grace: 300 * time.Millisecond, Command: []string{"sh", "-c", script}, Stderr: &stderr})
	if err != nil {
		h.t.Fatal(err)
	}
	return stderr.String()
}

func (h *harness) noneLeased() {
	h.t.Helper()
	counts, err := h.c.Counts(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	for q, states := range counts {
		if states["leased"] != 0 {
			h.t.Errorf("queue %s: %d tasks left leased", q, states["leased"])
		}
	}
}

// Exit 0 with one JSON value on stdout: succeeded with that value as the
// result. The payload arrives on stdin, the task's ids in the environment.
func TestACommandThatSucceeds(t *testing.T) {
	h := newHarness(t)
	task := h.enqueue(map[string]int{"n": 41}, 0)
	h.run(1, `read -r p; printf '{"payload":%s,"task":"%s","run":"%s","ns":"%s","queue":"%s","attempt":%s}\n' "$p" "$TESSERA_TASK_ID" "$TESSERA_RUN_ID" "$TESSERA_NAMESPACE" "$TESSERA_QUEUE" "$TESSERA_ATTEMPT"`, nil)

	got := h.task(task.ID)
	if got.State != client.StateSucceeded {
		t.Fatalf("state %s (error %q)", got.State, got.Error)
	}
	want := `{"payload":{"n":41},"task":"` + task.ID + `","run":"` + got.Runs[0].ID + `","ns":"main","queue":"work","attempt":1}`
	if string(got.Result) != want {
		t.Fatalf("result %s\nwant   %s", got.Result, want)
	}
	h.noneLeased()
}

// A task enqueued in a trace hands it to its command as TRACEPARENT and
// TRACESTATE (issue 43), where OpenTelemetry's environment carriers look;
// a task without one leaves them unset (the runner's own are cleared).
func TestACommandContinuesTheProducersTrace(t *testing.T) {
	h := newHarness(t)
	t.Setenv("TRACEPARENT", "00-11111111111111111111111111111111-2222222222222222-01")
	trace := &client.Trace{Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", Tracestate: "congo=t61rcWkgMzE"}
	traced, err := h.c.Enqueue(context.Background(), client.EnqueueRequest{Queue: "work", Title: "traced", Trace: trace, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	plain := h.enqueue(nil, 1)
	h.run(2, `printf '{"traceparent":"%s","tracestate":"%s","set":"%s"}\n' "$TRACEPARENT" "$TRACESTATE" "${TRACEPARENT+set}"`, nil)
	if got, want := string(h.task(traced.ID).Result), `{"traceparent":"`+trace.Traceparent+`","tracestate":"`+trace.Tracestate+`","set":"set"}`; got != want {
		t.Fatalf("the traced task's command saw %s, want %s", got, want)
	}
	if got, want := string(h.task(plain.ID).Result), `{"traceparent":"","tracestate":"","set":""}`; got != want {
		t.Fatalf("the untraced task's command saw %s, want %s", got, want)
	}
	h.noneLeased()
}

// Non-zero exit: failed, with the tail of stderr as the error.
func TestACommandThatFails(t *testing.T) {
	h := newHarness(t)
	task := h.enqueue(nil, 1)
	stderr := h.run(1, `echo "checking input" >&2; echo "no such document" >&2; exit 3`, nil)
	got := h.task(task.ID)
	if got.State != client.StateDead || got.Error != "checking input\nno such document" || got.Runs[0].Outcome != client.OutcomeFailed {
		t.Fatalf("task %s, error %q, runs %+v", got.State, got.Error, got.Runs)
	}
	if !strings.Contains(stderr, "no such document") {
		t.Fatalf("stderr was not passed on: %q", stderr)
	}
	h.noneLeased()
}

// Stdout that is not one JSON value: the result carries its start and a
// ref to a blob of all of it, bound to the run.
func TestACommandThatPrintsText(t *testing.T) {
	h := newHarness(t)
	task := h.enqueue(nil, 0)
	h.run(1, `echo "hello"; echo "world"`, nil)
	got := h.task(task.ID)
	var res struct {
		Stdout string `json:"stdout"`
		Bytes  int    `json:"stdout_bytes"`
		Ref    string `json:"stdout_ref"`
	}
	if err := json.Unmarshal(got.Result, &res); err != nil || got.State != client.StateSucceeded {
		t.Fatalf("task %s, result %s: %v", got.State, got.Result, err)
	}
	if res.Stdout != "hello\nworld\n" || res.Bytes != 12 || !strings.HasPrefix(res.Ref, "sha256:") {
		t.Fatalf("result %+v", res)
	}
	var blob bytes.Buffer
	if _, err := h.c.GetBlob(context.Background(), res.Ref, &blob); err != nil || blob.String() != "hello\nworld\n" {
		t.Fatalf("blob %q: %v", blob.String(), err)
	}
	meta, err := h.c.BlobMeta(context.Background(), res.Ref)
	if err != nil || meta.RunID != got.Runs[0].ID || meta.TaskID != task.ID {
		t.Fatalf("blob meta %+v: %v", meta, err)
	}
	h.noneLeased()
}

// Lines {"progress": …} on file descriptor 3 are sent as heartbeat
// progress.
func TestProgressOnFD3(t *testing.T) {
	h := newHarness(t)
	task := h.enqueue(nil, 0)
	h.run(1, `echo '{"progress":{"pct":50}}' >&3; echo 'not progress' >&3; sleep 1; echo '{}'`, nil)
	if got := h.task(task.ID); string(got.Progress) != `{"pct":50}` || got.State != client.StateSucceeded {
		t.Fatalf("task %s, progress %s", got.State, got.Progress)
	}
	h.noneLeased()
}

// waitForFile returns a file's contents once the command wrote it.
func waitForFile(t *testing.T, path string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if b, err := os.ReadFile(path); err == nil && bytes.HasSuffix(b, []byte("\n")) {
			return strings.TrimSpace(string(b))
		}
		if time.Now().After(deadline) {
			t.Fatalf("the command never wrote %s", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// A cancel while the command runs: SIGTERM to its process group, the task
// canceled. A command that ignores SIGTERM is killed after the grace.
func TestACanceledCommandIsStopped(t *testing.T) {
	for name, script := range map[string]string{
		"stops on SIGTERM": `echo $$ > "$PIDFILE.tmp"; mv "$PIDFILE.tmp" "$PIDFILE"; sleep 30`,
		"ignores SIGTERM":  `trap '' TERM; echo $$ > "$PIDFILE.tmp"; mv "$PIDFILE.tmp" "$PIDFILE"; sleep 30 & wait; sleep 30`,
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			task := h.enqueue(nil, 0)
			pidFile := filepath.Join(t.TempDir(), "pid")
			t.Setenv("PIDFILE", pidFile)
			done := make(chan struct{})
			go func() {
				defer close(done)
				h.run(1, script, nil)
			}()
			pid, err := strconv.Atoi(waitForFile(t, pidFile))
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if _, err := h.c.CancelTask(context.Background(), task.ID); err != nil {
				t.Fatal(err)
			}
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("the runner did not finish after the cancel")
			}
			if alive(pid) {
				t.Fatalf("the command (pid %d) outlived the cancel", pid)
			}
			if name == "ignores SIGTERM" && time.Since(start) < 300*time.Millisecond {
				t.Fatalf("killed after %v, before the grace of 300ms", time.Since(start))
			}
			got := h.task(task.ID)
			if got.State != client.StateCanceled || got.Runs[0].Outcome != "canceled" {
				t.Fatalf("task %s, runs %+v", got.State, got.Runs)
			}
			h.noneLeased()
		})
	}
}

// A key that may not write blobs still finishes the task: the result
// keeps the start of stdout and says why the rest was not kept.
func TestTextOutputWithoutTheWriteScope(t *testing.T) {
	h := newHarness(t)
	task := h.enqueue(nil, 0)
	ctx := context.Background()
	p, err := h.c.CreatePrincipal(ctx, client.PrincipalRequest{Kind: "agent", DisplayName: "claims only"})
	if err != nil {
		t.Fatal(err)
	}
	k, err := h.c.CreateKey(ctx, client.KeyRequest{PrincipalID: p.ID, Scopes: []string{"namespace:main", "claim"}})
	if err != nil {
		t.Fatal(err)
	}
	if h.c, err = client.New(h.srv.URL, client.WithKey(k.Secret)); err != nil {
		t.Fatal(err)
	}
	h.run(1, `echo plain text`, nil)
	if h.c, err = client.New(h.srv.URL, client.WithKey(testserver.AdminKey)); err != nil {
		t.Fatal(err)
	}
	got := h.task(task.ID)
	var res map[string]any
	if err := json.Unmarshal(got.Result, &res); err != nil || got.State != client.StateSucceeded {
		t.Fatalf("task %s, result %s", got.State, got.Result)
	}
	if res["stdout"] != "plain text\n" || res["stdout_ref"] != nil || !strings.Contains(res["stdout_blob_error"].(string), "forbidden") {
		t.Fatalf("result %v", res)
	}
	h.noneLeased()
}

// Reaching --max-tasks is no shutdown: a command that runs longer than the
// drain finishes and submits, and the runner reports nothing cut short.
func TestMaxTasksWaitsForACommandLongerThanTheDrain(t *testing.T) {
	h := newHarness(t)
	task := h.enqueue(nil, 0)
	err := runner.Run(context.Background(), runner.Config{Client: h.c, Queue: "work", LeaseSeconds: 60, MaxTasks: 1,
		Drain: 10 * time.Millisecond, Grace: 10 * time.Millisecond, Command: []string{"sh", "-c", `sleep 1; echo '{"slept":1}'`}})
	if err != nil {
		t.Fatalf("runner: %v", err)
	}
	if got := h.task(task.ID); got.State != client.StateSucceeded || string(got.Result) != `{"slept":1}` {
		t.Fatalf("task %s, result %s, runs %+v", got.State, got.Result, got.Runs)
	}
	h.noneLeased()
}

// A shutdown after --max-tasks was reached still drains: the command that
// outlives the drain is stopped, its task released without using an
// attempt, and the runner says it cut the command short.
func TestAShutdownAfterMaxTasksStillDrains(t *testing.T) {
	h := newHarness(t)
	task := h.enqueue(nil, 0)
	pidFile := filepath.Join(t.TempDir(), "pid")
	t.Setenv("PIDFILE", pidFile)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- runner.Run(ctx, runner.Config{Client: h.c, Queue: "work", LeaseSeconds: 60, MaxTasks: 1,
			Drain: 100 * time.Millisecond, Grace: 100 * time.Millisecond,
			Command: []string{"sh", "-c", `echo $$ > "$PIDFILE.tmp"; mv "$PIDFILE.tmp" "$PIDFILE"; sleep 30`}})
	}()
	pid, err := strconv.Atoi(waitForFile(t, pidFile))
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; !errors.Is(err, client.ErrDrained) {
		t.Fatalf("runner after the drain ran out: %v, want ErrCutShort", err)
	}
	if alive(pid) {
		t.Fatalf("the command (pid %d) outlived the drain", pid)
	}
	got := h.task(task.ID)
	if got.State != client.StateReady || got.Attempts != 0 || got.Runs[0].Outcome != "released" {
		t.Fatalf("task %s, attempts %d, runs %+v", got.State, got.Attempts, got.Runs)
	}
	h.noneLeased()
}

// The runner claims with its Capabilities: of a task it cannot take
// (first in claim order) and one it can, it runs the one it can.
func TestRunnerClaimsWithCapabilities(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	tpu, err := h.c.Enqueue(ctx, client.EnqueueRequest{Queue: "work", Title: "tpu", Priority: 9, Requires: []string{"tpu"}})
	if err != nil {
		t.Fatal(err)
	}
	gpu, err := h.c.Enqueue(ctx, client.EnqueueRequest{Queue: "work", Title: "gpu", Requires: []string{"gpu"}, Group: "tenant-a"})
	if err != nil {
		t.Fatal(err)
	}
	err = runner.Run(ctx, runner.Config{Client: h.c, Queue: "work", MaxTasks: 1, Capabilities: []string{"gpu", "cpu"},
		Command: []string{"sh", "-c", `echo '"ran"'`}})
	if err != nil {
		t.Fatal(err)
	}
	if got := h.task(gpu.ID); got.State != client.StateSucceeded || string(got.Result) != `"ran"` {
		t.Fatalf("the gpu task: %s %s", got.State, got.Result)
	}
	if got := h.task(tpu.ID); got.State != client.StateReady || got.Attempts != 0 {
		t.Fatalf("the tpu task: %s, %d attempts", got.State, got.Attempts)
	}
	h.noneLeased()
}

// A command that writes gate lines on fd 3 and exits 0 parks its task on
// them with its last checkpoint: its stdout is no result, and no attempt
// is used. Once they are answered, the next run finds the answers in
// TESSERA_GATE_ANSWERS_FILE (unset before: the first run had none)
// beside the checkpoint, and its stdout is the result.
func TestACommandOpensGatesOnFD3(t *testing.T) {
	h := newHarness(t)
	task := h.enqueue(nil, 1)
	script := `if [ -z "${TESSERA_GATE_ANSWERS_FILE+set}" ]; then
	echo '{"checkpoint":{"built":1}}' >&3
	echo '{"gate":{"key":"where","message":"Deploy where?","schema":{"type":"object","properties":{"region":{"type":"string","enum":["eu","us"]}}}}}' >&3
	echo '{"gates":[{"key":"ship","message":"Ship it?"}]}' >&3
	echo '"not the result"'
	exit 0
fi
printf '{"answers":%s,"checkpoint":%s}\n' "$(cat "$TESSERA_GATE_ANSWERS_FILE")" "$(cat "$TESSERA_CHECKPOINT_FILE")"`
	h.run(1, script, nil)
	got := h.task(task.ID)
	if got.State != client.StateGated || got.Attempts != 0 || len(got.Result) != 0 || got.Runs[0].Outcome != "gated" {
		t.Fatalf("after the first run: task %s, attempts %d, result %s, runs %+v", got.State, got.Attempts, got.Result, got.Runs)
	}
	kinds := map[string]string{}
	for _, g := range got.Gates {
		kinds[g.Key] = g.Kind
	}
	if len(got.Gates) != 2 || kinds["where"] != client.GateForm || kinds["ship"] != client.GateApproval {
		t.Fatalf("gates: %+v", got.Gates)
	}
	ctx := context.Background()
	if _, err := h.c.AnswerGate(ctx, task.ID, "where", client.GateAnswerRequest{Action: client.GateAccept, Content: map[string]string{"region": "eu"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.c.AnswerGate(ctx, task.ID, "ship", client.GateAnswerRequest{Action: client.GateDecline}); err != nil {
		t.Fatal(err)
	}

	h.run(1, script, nil)
	got = h.task(task.ID)
	var res struct {
		Answers    map[string]client.GateAnswer `json:"answers"`
		Checkpoint json.RawMessage              `json:"checkpoint"`
	}
	if err := json.Unmarshal(got.Result, &res); err != nil || got.State != client.StateSucceeded || got.Attempts != 1 {
		t.Fatalf("after the second run: task %s, attempts %d, result %s (error %q)", got.State, got.Attempts, got.Result, got.Error)
	}
	me, err := h.c.Me(ctx)
	if err != nil {
		t.Fatal(err)
	}
	where, ship := res.Answers["where"], res.Answers["ship"]
	if len(res.Answers) != 2 || where.Action != client.GateAccept || string(where.Content) != `{"region":"eu"}` || where.AnsweredBy != me.Principal.ID ||
		where.At.IsZero() || ship.Action != client.GateDecline || ship.Content != nil || string(res.Checkpoint) != `{"built":1}` {
		t.Fatalf("the second run read %s", got.Result)
	}
	h.noneLeased()
}

// A gate line whose gate is not one fails the run, though the command
// exited 0: it meant to wait for a person, and its stdout is not a result.
func TestAGateLineThatIsNoGateFailsTheRun(t *testing.T) {
	h := newHarness(t)
	task := h.enqueue(nil, 1)
	h.run(1, `echo '{"gate":"where"}' >&3; echo '"done"'`, nil)
	got := h.task(task.ID)
	if got.State != client.StateDead || len(got.Result) != 0 || !strings.Contains(got.Error, `fd 3: "gate" is not a gate`) {
		t.Fatalf("task %s, result %s, error %q", got.State, got.Result, got.Error)
	}
	h.noneLeased()
}

// A task enqueued after others with parent_results runs with its parents'
// ends in TESSERA_PARENTS_FILE: here the parent's run printed the result
// the child reads back.
func TestACommandReadsItsParentsResults(t *testing.T) {
	h := newHarness(t)
	parent := h.enqueue(nil, 1)
	h.run(1, `echo '{"rows":17}'`, nil)
	child, err := h.c.Enqueue(context.Background(), client.EnqueueRequest{Queue: "work", Title: "child", After: []string{parent.ID}, ParentResults: true})
	if err != nil {
		t.Fatal(err)
	}
	h.run(1, `cat "$TESSERA_PARENTS_FILE"`, nil)
	got := h.task(child.ID)
	var parents []client.ParentResult
	if err := json.Unmarshal(got.Result, &parents); err != nil || got.State != client.StateSucceeded {
		t.Fatalf("the child: %s, result %s (error %q)", got.State, got.Result, got.Error)
	}
	if len(parents) != 1 || parents[0].TaskID != parent.ID || parents[0].Outcome != client.StateSucceeded || string(parents[0].Result) != `{"rows":17}` {
		t.Errorf("the child read its parents as %s", got.Result)
	}
	h.noneLeased()
}
