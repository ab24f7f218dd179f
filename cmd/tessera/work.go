package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/tessera-dev/tessera/internal/runner"
)

const workUsage = `usage: tessera work [flags] -- CMD ARGS...

Claims tasks from --queue and runs CMD for each: the payload as JSON on
stdin, the task's ids in TESSERA_* variables, {"progress": …} lines on
fd 3 sent as heartbeat progress. Exit 0 submits succeeded with stdout as
the result; any other exit submits failed with the end of stderr.

--capability C (repeatable) shows what this worker has: it is granted only
tasks whose requires (tessera tasks enqueue --requires) are all among its
capabilities. With --cooldown D, a command that exits 75 (EX_TEMPFAIL:
say, its upstream answered 429) fails its run and pauses its task's group
for D: the group's ready tasks wait, the rest of the queue flows.

--max-tasks N claims N tasks, then exits once they have finished, however
long they run. SIGTERM or SIGINT stops claiming: running commands get
--drain to finish; those still running then are stopped (SIGTERM, SIGKILL
after --grace) and their tasks released, no attempt used.

Exit codes: 0 every claimed task ran to its end; 8 the drain ran out and
commands were stopped; 5 the key may not claim here; 2 bad usage.

flags:
`

// workCmd is `tessera work [flags] -- CMD ARGS...`: the worker runner
// (internal/runner). SIGTERM or SIGINT (ctx) starts its drain.
func workCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("work")
	cn := connFlags(fs, stdout, stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, workUsage)
		printFlags(fs)
	}
	cfg := runner.Config{Stderr: stderr}
	fs.StringVar(&cfg.Queue, "queue", "default", "queue to claim from")
	fs.IntVar(&cfg.Concurrency, "concurrency", 1, "commands run at once")
	lease := fs.Duration("lease", runner.DefaultLeaseSeconds*time.Second, "lease of each claim, 10s–1h (the API's 10–3600 s); heartbeats come at a third of it")
	fs.DurationVar(&cfg.Drain, "drain", runner.DefaultDrain, "on SIGTERM or SIGINT only: how long running commands may finish before they are stopped and their tasks released (exit code 8)")
	fs.DurationVar(&cfg.Grace, "grace", runner.DefaultGrace, "between SIGTERM and SIGKILL of a command that is stopped")
	var caps stringsFlag
	fs.Var(&caps, "capability", "a capability this worker has, e.g. gpu or repo:foo (repeat, or comma-separated; at most 64): it is granted only tasks whose requires are all among them, and without any only tasks that require nothing")
	fs.DurationVar(&cfg.Cooldown, "cooldown", 0, "pause the task's group this long when the command exits 75 (0: no cooldown; at most 24h)")
	fs.IntVar(&cfg.MaxTasks, "max-tasks", 0, "claim this many tasks, then exit once they have finished, however long they run (0: run until stopped)")
	logFormat := fs.String("log-format", "text", "log format: text or json")
	cmd, err := parseCLI(fs, args, 1, -1)
	if err != nil {
		return err
	}
	if *lease < 10*time.Second || *lease > time.Hour {
		return usagef("work: --lease must be 10s–1h")
	}
	if cfg.Concurrency < 1 || cfg.MaxTasks < 0 || cfg.Drain < 0 || cfg.Grace < 0 || cfg.Cooldown < 0 || cfg.Cooldown > 24*time.Hour {
		return usagef("work: --concurrency must be ≥ 1; --max-tasks, --drain and --grace ≥ 0; --cooldown 0–24h")
	}
	cfg.Log = newLogger(*logFormat, stderr)
	// The client says what becomes of each task, and warns of a queue
	// that has never had one, to the same log.
	cn.log = cfg.Log
	if cfg.Client, err = cn.client(); err != nil {
		return err
	}
	cfg.Command = cmd
	cfg.Capabilities = caps
	cfg.LeaseSeconds = int(*lease / time.Second)
	// Commands reach the same server with the same key, so they can
	// write records and blobs under TESSERA_LEASE_TOKEN.
	cfg.Env = []string{"TESSERA_URL=" + cn.url, "TESSERA_KEY=" + cn.key}
	return runner.Run(ctx, cfg)
}
