package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/client"
	"github.com/tessera-dev/tessera/internal/testserver"
)

// SIGTERM to `tessera work` (the real binary) while commands run: it
// stops claiming, lets the command that finishes within --drain submit,
// stops the one that does not and releases its task, and exits 8 (a
// command was cut short). No task is left leased and no command outlives
// it.
func TestWorkDrainsOnSIGTERM(t *testing.T) {
	bin := buildTessera(t)
	srv := testserver.Start(t, testserver.Options{})
	ctx := context.Background()
	c, err := client.New(srv.URL, client.WithKey(testserver.AdminKey))
	if err != nil {
		t.Fatal(err)
	}
	quick, err := c.Enqueue(ctx, client.EnqueueRequest{Queue: "work", Title: "quick", Payload: 1, Priority: 1})
	if err != nil {
		t.Fatal(err)
	}
	slow, err := c.Enqueue(ctx, client.EnqueueRequest{Queue: "work", Title: "slow", Payload: 60})
	if err != nil {
		t.Fatal(err)
	}

	pids := filepath.Join(t.TempDir(), "pids")
	cmd := exec.Command(bin, "work", "--queue", "work", "--concurrency", "2", "--drain", "3s", "--grace", "300ms", "--lease", "60s",
		"--", "sh", "-c", `read -r d; echo $$ >> "$PIDS"; sleep "$d"; echo '{"slept":'"$d"'}'`)
	cmd.Env = cleanEnv("TESSERA_URL="+srv.URL, "TESSERA_KEY="+testserver.AdminKey, "PIDS="+pids)
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	var started []int
	deadline := time.Now().Add(15 * time.Second)
	for len(started) < 2 {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("the two commands did not start; runner said:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
		b, _ := os.ReadFile(pids)
		started = started[:0]
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				started = append(started, pid)
			}
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		if code := cmd.ProcessState.ExitCode(); code != exitCutShort {
			t.Fatalf("tessera work exited with %d after SIGTERM, want %d:\n%s", code, exitCutShort, stderr.String())
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("tessera work did not exit after SIGTERM:\n%s", stderr.String())
	}
	for _, pid := range started {
		if syscall.Kill(pid, 0) == nil {
			t.Errorf("command pid %d outlived the runner", pid)
		}
	}
	if got, err := c.GetTask(ctx, quick.ID); err != nil || got.State != client.StateSucceeded || string(got.Result) != `{"slept":1}` {
		t.Fatalf("the quick task: %+v, %v", got, err)
	}
	got, err := c.GetTask(ctx, slow.ID)
	if err != nil || got.State != client.StateReady || got.Attempts != 0 || got.Runs[0].Outcome != "released" {
		t.Fatalf("the slow task: %+v, %v", got, err)
	}
	counts, err := c.Counts(ctx)
	if err != nil || counts["work"]["leased"] != 0 {
		t.Fatalf("left leased: %v, %v", counts, err)
	}
}

// `tessera work` on a queue that has never had a task warns of it on
// stderr, naming the queue and the namespace, and goes on waiting.
func TestWorkWarnsOfAQueueThatNeverHadATask(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	t.Setenv("TESSERA_URL", srv.URL)
	t.Setenv("TESSERA_KEY", testserver.AdminKey)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &lockedBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"work", "--queue", "typo", "-n", "build", "--", "true"}, io.Discard, stderr)
	}()
	want := `queue \"typo\" in namespace \"build\" has never had a task; check the queue and namespace names`
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(stderr.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no warning within 20 s; stderr:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("tessera work stopped with %v", err)
	}
	if n := strings.Count(stderr.String(), "never had a task"); n != 1 {
		t.Fatalf("warned %d times:\n%s", n, stderr.String())
	}
}

// A command killed half-way leaves its checkpoint for the next attempt:
// the first `tessera work` reports {"checkpoint": …} on fd 3 and is killed
// (-9, with its command) before it finishes; once the lease lapses, the
// second one's command finds the checkpoint in TESSERA_CHECKPOINT_FILE,
// and resumes from it.
func TestWorkResumesFromTheCheckpointAKilledRunLeft(t *testing.T) {
	bin := buildTessera(t)
	srv := testserver.Start(t, testserver.Options{})
	ctx := context.Background()
	c, err := client.New(srv.URL, client.WithKey(testserver.AdminKey))
	if err != nil {
		t.Fatal(err)
	}
	task, err := c.Enqueue(ctx, client.EnqueueRequest{Queue: "cp", Title: "resumable"})
	if err != nil {
		t.Fatal(err)
	}
	first := exec.Command(bin, "work", "--queue", "cp", "--lease", "30s",
		"--", "sh", "-c", `echo '{"checkpoint":{"done":3}}' >&3; exec sleep 60`)
	first.Env = cleanEnv("TESSERA_URL="+srv.URL, "TESSERA_KEY="+testserver.AdminKey)
	first.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		got, err := c.GetTask(ctx, task.ID)
		if err == nil && got.Checkpoint != nil {
			break
		}
		if time.Now().After(deadline) {
			syscall.Kill(-first.Process.Pid, syscall.SIGKILL)
			t.Fatalf("no checkpoint reached the server: %+v, %v", got, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	syscall.Kill(-first.Process.Pid, syscall.SIGKILL) // the runner and its command, as a crash would
	first.Wait()

	srv.Clock.Advance(31 * time.Second) // the lease lapses, noticed by the next claim
	if _, _, err := c.Claim(ctx, client.ClaimRequest{Queue: "cp"}); err != nil {
		t.Fatal(err)
	}
	srv.Clock.Advance(time.Minute) // past the backoff
	second := exec.Command(bin, "work", "--queue", "cp", "--max-tasks", "1",
		"--", "sh", "-c", `echo "{\"resumed\":$(cat "$TESSERA_CHECKPOINT_FILE"),\"from_attempt\":$TESSERA_CHECKPOINT_ATTEMPT}"`)
	second.Env = cleanEnv("TESSERA_URL="+srv.URL, "TESSERA_KEY="+testserver.AdminKey)
	out, err := second.CombinedOutput()
	if err != nil {
		t.Fatalf("the second run: %v\n%s", err, out)
	}
	got, err := c.GetTask(ctx, task.ID)
	if err != nil || got.State != client.StateSucceeded || string(got.Result) != `{"resumed":{"done":3},"from_attempt":1}` || got.Attempts != 2 {
		t.Fatalf("the task after the second run: %+v, %v", got, err)
	}
}
