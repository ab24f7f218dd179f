// Package runner is `tessera work`: a worker loop that claims tasks with
// long-poll and runs a command for each, so a worker needs no code of its
// own. The command gets the task's payload as JSON on stdin and the task's
// ids in its environment; its exit status, stdout and stderr become the
// submitted outcome. It owns the child processes' lives: heartbeats while
// they run, a cancel turned into SIGTERM then SIGKILL of the process
// group, and a drain on shutdown that releases what did not finish —
// through client.Work, whose handler the command is.
package runner

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/tessera-dev/tessera/client"
)

// Config configures a runner.
type Config struct {
	Client *client.Client
	// Queue is claimed from (default "default").
	Queue string
	// Concurrency is how many commands run at once (default 1).
	Concurrency int
	// LeaseSeconds is each claim's lease (default the server's, 300);
	// heartbeats come at a third of it.
	LeaseSeconds int
	// Drain is how long a stopping runner lets running commands finish
	// before it stops them and releases their tasks.
	Drain time.Duration
	// Grace is how long a command has between SIGTERM and SIGKILL.
	Grace time.Duration
	// MaxTasks makes the runner claim that many tasks and return once
	// they have finished (0: until ctx ends).
	MaxTasks int
	// Capabilities are shown with every claim: only tasks whose requires
	// are all among them are granted (none: only tasks that require
	// nothing).
	Capabilities []string
	// Cooldown, when above 0, is how long a command that exits with
	// CooldownExit (75, EX_TEMPFAIL: say, after an upstream's 429) pauses
	// its task's group; the run fails as any failed command's does.
	Cooldown time.Duration
	// Command is the program and its arguments.
	Command []string
	// Env is added to each command's environment (after the runner's own
	// and before the task's variables).
	Env []string
	// Stderr receives a copy of each command's stderr (nil: discarded).
	Stderr io.Writer
	// Log hears what becomes of each command. What becomes of each task
	// (claimed, submitted, released) goes to the client's logger
	// (client.WithLogger).
	Log *slog.Logger
}

// CooldownExit is the exit status that asks for a cooldown (Config.Cooldown).
const CooldownExit = 75

// Defaults of Config.
const (
	DefaultLeaseSeconds = 300
	DefaultDrain        = client.DefaultDrain
	DefaultGrace        = 10 * time.Second
)

// Run claims and runs tasks until ctx ends or MaxTasks were claimed: the
// Go client's worker loop (client.Work) with a command as its handler.
// Reaching MaxTasks lets the running commands finish, however long they
// take. When ctx ends (a shutdown) it stops claiming, lets running
// commands finish within Drain, then stops the rest, releases their tasks
// and returns an error wrapping client.ErrDrained. It returns another
// error only when it cannot go on claiming (a bad key, a missing scope).
func Run(ctx context.Context, cfg Config) error {
	if len(cfg.Command) == 0 {
		return errors.New("runner: no command to run")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Stderr == nil {
		cfg.Stderr = io.Discard
	}
	// Drain 0 is "stop at once" here, client.Work's negative.
	drain := cfg.Drain
	if drain == 0 {
		drain = -1
	}
	return cfg.Client.Work(ctx, cmp.Or(cfg.Queue, "default"), func(ctx context.Context, job *client.Job) (any, error) {
		return runCommand(ctx, cfg, job)
	}, client.WorkOptions{Concurrency: cfg.Concurrency, LeaseSeconds: cfg.LeaseSeconds, Drain: drain, MaxTasks: cfg.MaxTasks,
		Capabilities: cfg.Capabilities})
}
