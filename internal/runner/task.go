package runner

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/tessera-dev/tessera/client"
)

// Bounds of what a command's output becomes.
const (
	// maxResult is the API's bound on a submitted result.
	maxResult = 256 << 10
	// stdoutInline is how much of a stdout that is not one JSON value the
	// result carries; the whole of it goes to a blob.
	stdoutInline = 16 << 10
	// maxStdoutBlob bounds the stdout kept as a blob (the server's default
	// blob limit); beyond it the blob holds the first part.
	maxStdoutBlob = 32 << 20
	// stderrTail is how much of stderr a failure's error carries (the
	// API's bound on error).
	stderrTail = 4 << 10
	// maxProgress is the API's bound on a heartbeat's progress.
	maxProgress = 4 << 10
)

// runTask runs the command for one claimed task and submits what came of
// it. work ends when the runner's drain ran out: then the command is
// stopped and the task released.
func runTask(work context.Context, cfg Config, cl *client.Claim) {
	log := cfg.Log.With("task", cl.Task.ID, "run", cl.Lease.RunID)
	lease := cfg.Client.Keep(context.Background(), cl, client.KeepOptions{})
	defer lease.Stop()
	// Submits and releases are not cut short by the runner stopping.
	ctx := context.Background()

	ch, err := start(cfg, cl, lease)
	if err != nil {
		log.Error("command did not start", "err", err)
		submit(ctx, log, lease, client.SubmitRequest{Outcome: client.OutcomeFailed, Error: err.Error()})
		return
	}
	defer ch.cleanup()
	select {
	case err = <-ch.exited:
	case <-lease.Context().Done():
		ch.stop(cfg.Grace)
		cause := context.Cause(lease.Context())
		if errors.Is(cause, client.ErrCancelRequested) {
			log.Info("task canceled; command stopped")
		} else {
			log.Warn("lease lost; command stopped", "err", cause)
		}
		return
	case <-work.Done():
		ch.stop(cfg.Grace)
		if _, err := lease.Release(ctx); err != nil {
			log.Warn("release failed; the lease will lapse", "err", err)
			return
		}
		log.Info("drain ran out; command stopped and task released")
		return
	}

	if err != nil {
		msg := tail(ch.stderr.Bytes())
		if msg == "" {
			msg = err.Error()
		}
		log.Info("command failed", "err", err)
		submit(ctx, log, lease, client.SubmitRequest{Outcome: client.OutcomeFailed, Error: msg})
		return
	}
	res, err := result(ctx, cfg.Client, ch.stdout, cl.Lease.Token)
	if err != nil {
		log.Error("output not kept", "err", err)
		submit(ctx, log, lease, client.SubmitRequest{Outcome: client.OutcomeFailed, Error: "tessera work: " + err.Error()})
		return
	}
	submit(ctx, log, lease, client.SubmitRequest{Outcome: client.OutcomeSucceeded, Result: res})
}

func submit(ctx context.Context, log *slog.Logger, lease *client.Keeper, req client.SubmitRequest) {
	task, err := lease.Submit(ctx, req)
	switch {
	case client.IsLeaseLost(err):
		log.Info("submit too late: the lease is over", "outcome", req.Outcome)
	case err != nil:
		log.Info("submit failed; the lease will lapse", "err", err)
	default:
		log.Info("task submitted", "outcome", req.Outcome, "state", task.State)
	}
}

// child is a running command.
type child struct {
	cmd    *exec.Cmd
	stdout *os.File
	stderr *tailBuffer
	exited chan error
}

// start starts the command in its own process group, with the payload on
// stdin, stdout to a temporary file, stderr kept (its tail) and copied,
// and file descriptor 3 read for progress lines.
func start(cfg Config, cl *client.Claim, lease *client.Keeper) (*child, error) {
	out, err := os.CreateTemp("", "tessera-work-stdout-")
	if err != nil {
		return nil, err
	}
	os.Remove(out.Name()) // the open file is all that is needed
	progressR, progressW, err := os.Pipe()
	if err != nil {
		out.Close()
		return nil, err
	}
	payload := []byte(cl.Task.Payload)
	if len(payload) == 0 {
		payload = []byte("null")
	}
	cmd := exec.Command(cfg.Command[0], cfg.Command[1:]...)
	cmd.Stdin = bytes.NewReader(append(payload, '\n'))
	cmd.Stdout = out
	ch := &child{cmd: cmd, stdout: out, stderr: &tailBuffer{max: stderrTail}, exited: make(chan error, 1)}
	cmd.Stderr = io.MultiWriter(ch.stderr, cfg.Stderr)
	cmd.ExtraFiles = []*os.File{progressW}
	cmd.Env = append(append(os.Environ(), cfg.Env...),
		"TESSERA_TASK_ID="+cl.Task.ID,
		"TESSERA_RUN_ID="+cl.Lease.RunID,
		"TESSERA_NAMESPACE="+cl.Task.Namespace,
		"TESSERA_QUEUE="+cl.Task.Queue,
		"TESSERA_ATTEMPT="+strconv.Itoa(cl.Task.Attempts),
		"TESSERA_LEASE_TOKEN="+cl.Lease.Token,
	)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A grandchild holding stderr open must not keep Wait from returning.
	cmd.WaitDelay = max(cfg.Grace, time.Second)
	err = cmd.Start()
	progressW.Close()
	if err != nil {
		progressR.Close()
		out.Close()
		return nil, err
	}
	go readProgress(progressR, lease)
	go func() { ch.exited <- cmd.Wait() }()
	return ch, nil
}

// stop sends SIGTERM to the command's process group and SIGKILL after
// grace, and waits for the command to exit.
func (ch *child) stop(grace time.Duration) {
	pgid := ch.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-ch.exited:
	case <-t.C:
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-ch.exited
	}
	// Whatever of the group outlived its leader goes too.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

func (ch *child) cleanup() { ch.stdout.Close() }

// readProgress turns {"progress": …} lines on fd 3 into heartbeat
// progress; other lines are ignored.
func readProgress(r *os.File, lease *client.Keeper) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for sc.Scan() {
		var line struct {
			Progress json.RawMessage `json:"progress"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil || len(line.Progress) == 0 || len(line.Progress) > maxProgress {
			continue
		}
		lease.Progress(line.Progress)
	}
	_, _ = io.Copy(io.Discard, r) // a line too long ends the scan; keep the writer from blocking
}

// result is what a command's stdout becomes: the stdout itself when it is
// one JSON value within the bound; else {"stdout": its first 16 KiB,
// "stdout_bytes": its size, "stdout_ref": a blob of all of it bound to the
// run} — or "stdout_blob_error" when the blob could not be stored. An
// empty stdout is no result.
func result(ctx context.Context, c *client.Client, stdout *os.File, leaseToken string) (any, error) {
	if _, err := stdout.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	out, err := io.ReadAll(io.LimitReader(stdout, maxStdoutBlob+1))
	if err != nil {
		return nil, err
	}
	trimmed := bytes.TrimSpace(out)
	switch {
	case len(trimmed) == 0:
		return nil, nil
	case len(trimmed) <= maxResult && json.Valid(trimmed):
		return json.RawMessage(trimmed), nil
	}
	truncated := len(out) > maxStdoutBlob
	if truncated {
		out = out[:maxStdoutBlob]
	}
	res := map[string]any{"stdout": validPrefix(out, stdoutInline), "stdout_bytes": len(out)}
	if truncated {
		res["stdout_truncated"] = true
	}
	// The work is done either way: a key that may not write blobs (or a
	// refusing store) costs the full output, not the outcome.
	if ref, err := c.PutBlob(ctx, out, "text/plain; charset=utf-8", leaseToken); err != nil {
		res["stdout_blob_error"] = err.Error()
	} else {
		res["stdout_ref"] = ref
	}
	return res, nil
}

// validPrefix is at most n bytes of b, cut at a character boundary, with
// invalid UTF-8 replaced.
func validPrefix(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
		for len(b) > 0 && !utf8.Valid(b[len(b)-min(len(b), utf8.UTFMax):]) {
			b = b[:len(b)-1]
		}
	}
	return string(bytes.ToValidUTF8(b, []byte("\uFFFD")))
}

// tail is the end of a command's stderr as an error message, within the
// API's bound: invalid UTF-8 becomes "?", which keeps the length.
func tail(b []byte) string {
	b = bytes.TrimSpace(b)
	for len(b) > 0 && !utf8.RuneStart(b[0]) {
		b = b[1:]
	}
	return string(bytes.ToValidUTF8(b, []byte("?")))
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) Bytes() []byte { return t.b }
