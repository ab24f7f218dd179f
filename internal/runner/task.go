package runner

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
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
	// maxProgress and maxCheckpoint are the API's bounds on a heartbeat's
	// progress and checkpoint.
	maxProgress   = 4 << 10
	maxCheckpoint = 64 << 10
	// maxFD3Line bounds a line on fd 3: room for a checkpoint, or for the
	// most gates a task may have (16) each at the API's bounds (a 16 KiB
	// schema, a 2 KiB message, a 2 KiB URL).
	maxFD3Line = 512 << 10
)

// runCommand runs the command for one claimed task and returns what came
// of it, for client.Work to submit. ctx ends when the task's cancel was
// requested, its lease was lost, or the runner's drain ran out: then the
// command is stopped, and what becomes of the task is Work's to decide.
func runCommand(ctx context.Context, cfg Config, job *client.Job) (any, error) {
	log := cfg.Log.With("task", job.Task.ID, "run", job.Lease.RunID)
	ch, err := start(cfg, job)
	if err != nil {
		log.Error("command did not start", "err", err)
		return nil, err
	}
	defer ch.cleanup()
	select {
	case err = <-ch.exited:
	case <-ctx.Done():
		ch.stop(cfg.Grace)
		log.Info("command stopped", "why", context.Cause(ctx))
		return nil, context.Cause(ctx)
	}
	if err != nil {
		log.Info("command failed", "err", err)
		if msg := tail(ch.stderr.Bytes()); msg != "" {
			err = errors.New(msg)
		}
		if cfg.Cooldown > 0 && ch.cmd.ProcessState.ExitCode() == CooldownExit {
			return nil, client.Cooldown(cfg.Cooldown, err)
		}
		return nil, err
	}
	gates, err := ch.gates()
	if err != nil {
		log.Info("command's gates not opened", "err", err)
		return nil, fmt.Errorf("tessera work: %w", err)
	}
	if len(gates) > 0 {
		// The stdout of a run that waits for a person is no result.
		return job.Gate(gates...)
	}
	// The command has finished: its output is kept even if the drain runs
	// out meanwhile.
	res, err := result(context.WithoutCancel(ctx), cfg.Client, ch.stdout, job.Lease.Token)
	if err != nil {
		log.Error("output not kept", "err", err)
		return nil, fmt.Errorf("tessera work: %w", err)
	}
	return res, nil
}

// child is a running command.
type child struct {
	cmd    *exec.Cmd
	stdout *os.File
	stderr *tailBuffer
	exited chan error
	// files are what the command is given to read (the previous
	// checkpoint, the gates' answers), removed when it ends.
	files []string
	// fd3 is read by readFD3 until fd3Read is closed; then fd3Gates and
	// fd3Err are what its lines asked for.
	fd3      *os.File
	fd3Read  chan struct{}
	fd3Gates []client.GateSpec
	fd3Err   error
}

// environ is the runner's environment without a trace context of its
// own: a command continues its task's trace, or none.
func environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TRACEPARENT=") && !strings.HasPrefix(kv, "TRACESTATE=") {
			env = append(env, kv)
		}
	}
	return env
}

// start starts the command in its own process group, with the payload on
// stdin, stdout to a temporary file, stderr kept (its tail) and copied,
// file descriptor 3 read for progress, checkpoint and gate lines; the
// previous attempt's checkpoint, when it left one, and the answers of the
// task's gates, when it had any, and its parents' ends, when it was
// enqueued with parent_results, in files its environment names
// (TESSERA_CHECKPOINT_FILE, TESSERA_GATE_ANSWERS_FILE,
// TESSERA_PARENTS_FILE); and the task's
// trace context, when it has one, as TRACEPARENT and TRACESTATE.
func start(cfg Config, job *client.Job) (*child, error) {
	out, err := os.CreateTemp("", "tessera-work-stdout-")
	if err != nil {
		return nil, err
	}
	os.Remove(out.Name()) // the open file is all that is needed
	ch := &child{stdout: out, stderr: &tailBuffer{max: stderrTail}, exited: make(chan error, 1), fd3Read: make(chan struct{})}
	env := append(append(environ(), cfg.Env...),
		"TESSERA_TASK_ID="+job.Task.ID,
		"TESSERA_RUN_ID="+job.Lease.RunID,
		"TESSERA_NAMESPACE="+job.Task.Namespace,
		"TESSERA_QUEUE="+job.Task.Queue,
		"TESSERA_ATTEMPT="+strconv.Itoa(job.Task.Attempts),
		"TESSERA_LEASE_TOKEN="+job.Lease.Token,
	)
	if t := job.Task.Trace; t != nil {
		// The names OpenTelemetry's environment carriers read: the
		// command's spans continue the producer's trace.
		env = append(env, "TRACEPARENT="+t.Traceparent, "TRACESTATE="+t.Tracestate)
	}
	if c := job.PreviousCheckpoint; c != nil {
		name, err := ch.writeFile("checkpoint", c.Value)
		if err != nil {
			ch.cleanup()
			return nil, err
		}
		env = append(env, "TESSERA_CHECKPOINT_FILE="+name, "TESSERA_CHECKPOINT_ATTEMPT="+strconv.Itoa(c.Attempt))
	}
	for _, f := range []struct {
		name, env string
		v         any
		has       bool
	}{
		{"gate-answers", "TESSERA_GATE_ANSWERS_FILE", job.GateAnswers, job.GateAnswers != nil},
		{"parents", "TESSERA_PARENTS_FILE", job.Parents, job.Parents != nil},
	} {
		if !f.has {
			continue
		}
		name, err := ch.writeFile(f.name, f.v)
		if err != nil {
			ch.cleanup()
			return nil, err
		}
		env = append(env, f.env+"="+name)
	}
	progressR, progressW, err := os.Pipe()
	if err != nil {
		ch.cleanup()
		return nil, err
	}
	payload := []byte(job.Task.Payload)
	if len(payload) == 0 {
		payload = []byte("null")
	}
	cmd := exec.Command(cfg.Command[0], cfg.Command[1:]...)
	ch.cmd = cmd
	cmd.Stdin = bytes.NewReader(append(payload, '\n'))
	cmd.Stdout = out
	cmd.Stderr = io.MultiWriter(ch.stderr, cfg.Stderr)
	cmd.ExtraFiles = []*os.File{progressW}
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A grandchild holding stderr open must not keep Wait from returning.
	cmd.WaitDelay = max(cfg.Grace, time.Second)
	err = cmd.Start()
	progressW.Close()
	if err != nil {
		progressR.Close()
		ch.cleanup()
		return nil, err
	}
	ch.fd3 = progressR
	go func() {
		defer close(ch.fd3Read)
		ch.fd3Gates, ch.fd3Err = readFD3(progressR, job)
	}()
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

func (ch *child) cleanup() {
	ch.stdout.Close()
	for _, name := range ch.files {
		os.Remove(name)
	}
}

// writeFile puts v's JSON in a file of its own for the command to read,
// removed by cleanup.
func (ch *child) writeFile(what string, v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp("", "tessera-work-"+what+"-")
	if err != nil {
		return "", err
	}
	ch.files = append(ch.files, f.Name())
	_, err = f.Write(append(b, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return f.Name(), err
}

// gates are the gates the exited command's fd 3 lines opened. Its lines
// are read to their end first, since the last may still be in the pipe;
// something the command left running that holds fd 3 open is given as
// long as it is on stderr (WaitDelay) before the reading stops.
func (ch *child) gates() ([]client.GateSpec, error) {
	_ = ch.fd3.SetReadDeadline(time.Now().Add(ch.cmd.WaitDelay))
	<-ch.fd3Read
	return ch.fd3Gates, ch.fd3Err
}

// readFD3 turns {"progress": …} lines on fd 3 into heartbeat progress,
// {"checkpoint": …} lines into checkpoints sent with the next heartbeat,
// and returns the gates {"gate": {…}} and {"gates": [{…}, …]} lines
// opened, in their order (one line may carry several of these); other
// lines are ignored. A gate that does not decode is an error, not a line
// to ignore: the command meant to wait for a person, and its stdout must
// not pass for its result.
func readFD3(r *os.File, job *client.Job) (gates []client.GateSpec, err error) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxFD3Line)
	for sc.Scan() {
		var line struct {
			Progress   json.RawMessage `json:"progress"`
			Checkpoint json.RawMessage `json:"checkpoint"`
			Gate       json.RawMessage `json:"gate"`
			Gates      json.RawMessage `json:"gates"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue
		}
		if n := len(line.Progress); n > 0 && n <= maxProgress {
			job.Progress(line.Progress)
		}
		if n := len(line.Checkpoint); n > 0 && n <= maxCheckpoint {
			job.Checkpoint(line.Checkpoint)
		}
		more, lerr := lineGates(line.Gate, line.Gates)
		if err == nil {
			err = lerr
		}
		gates = append(gates, more...)
	}
	_, _ = io.Copy(io.Discard, r) // a line too long ends the scan; keep the writer from blocking
	return gates, err
}

// lineGates are the gates of one fd 3 line: its "gate", then its "gates".
func lineGates(gate, list json.RawMessage) ([]client.GateSpec, error) {
	var out []client.GateSpec
	if gate != nil {
		var g client.GateSpec
		if err := json.Unmarshal(gate, &g); err != nil {
			return nil, fmt.Errorf(`fd 3: "gate" is not a gate: %w`, err)
		}
		out = append(out, g)
	}
	if list != nil {
		var gs []client.GateSpec
		if err := json.Unmarshal(list, &gs); err != nil {
			return nil, fmt.Errorf(`fd 3: "gates" is not a list of gates: %w`, err)
		}
		out = append(out, gs...)
	}
	return out, nil
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
