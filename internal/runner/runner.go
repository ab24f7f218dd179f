// Package runner is `tessera work`: a worker loop that claims tasks with
// long-poll and runs a command for each, so a worker needs no code of its
// own. The command gets the task's payload as JSON on stdin and the task's
// ids in its environment; its exit status, stdout and stderr become the
// submitted outcome. It owns the child processes' lives: heartbeats while
// they run, a cancel turned into SIGTERM then SIGKILL of the process
// group, and a drain on shutdown that releases what did not finish.
package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
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
	// LeaseSeconds is each claim's lease (default 300); heartbeats come
	// at a third of it.
	LeaseSeconds int
	// Drain is how long a stopping runner lets running commands finish
	// before it stops them and releases their tasks.
	Drain time.Duration
	// Grace is how long a command has between SIGTERM and SIGKILL.
	Grace time.Duration
	// MaxTasks stops the runner after that many tasks (0: never).
	MaxTasks int
	// Command is the program and its arguments.
	Command []string
	// Env is added to each command's environment (after the runner's own
	// and before the task's variables).
	Env []string
	// Stderr receives a copy of each command's stderr (nil: discarded).
	Stderr io.Writer
	Log    *slog.Logger
}

// Defaults of Config.
const (
	DefaultLeaseSeconds = 300
	DefaultDrain        = 30 * time.Second
	DefaultGrace        = 10 * time.Second
)

// ErrCutShort is what Run returns when its drain ran out: commands still
// running were stopped and their tasks released (or, where the release
// failed, left to lapse).
var ErrCutShort = errors.New("runner: the drain ran out; running commands were stopped and their tasks released")

// Run claims and runs tasks until ctx ends or MaxTasks were claimed.
// Reaching MaxTasks lets the running commands finish, however long they
// take. When ctx ends (a shutdown) it stops claiming, lets running
// commands finish within Drain, then stops the rest and releases their
// tasks, and returns ErrCutShort. It returns another error only when it
// cannot go on claiming (a bad key, a missing scope).
func Run(ctx context.Context, cfg Config) error {
	if len(cfg.Command) == 0 {
		return errors.New("runner: no command to run")
	}
	cfg.Queue = cmp.Or(cfg.Queue, "default")
	cfg.Concurrency = max(cfg.Concurrency, 1)
	if cfg.LeaseSeconds == 0 {
		cfg.LeaseSeconds = DefaultLeaseSeconds
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Stderr == nil {
		cfg.Stderr = io.Discard
	}
	// Running commands live on their own context: the runner's ending
	// starts the drain, not their end.
	work, stopWork := context.WithCancelCause(context.Background())
	defer stopWork(nil)
	slots := make(chan struct{}, cfg.Concurrency)
	var running sync.WaitGroup
	fatal := claimLoop(ctx, cfg, slots, func(cl *client.Claim) {
		running.Add(1)
		go func() {
			defer running.Done()
			defer func() { <-slots }()
			runTask(work, cfg, cl)
		}()
	})

	finished := make(chan struct{})
	go func() { running.Wait(); close(finished) }()
	// The claim loop also ends at MaxTasks: that is no shutdown, and the
	// drain's clock starts only when one comes.
	select {
	case <-finished:
		return fatal
	case <-ctx.Done():
	}
	cfg.Log.Info("draining", "running", len(slots), "drain", cfg.Drain)
	t := time.NewTimer(cfg.Drain)
	defer t.Stop()
	select {
	case <-finished:
		return fatal
	case <-t.C:
	}
	stopWork(ErrCutShort)
	<-finished
	return errors.Join(fatal, ErrCutShort)
}

// claimLoop claims a task whenever a slot is free and hands it to start,
// until ctx ends, MaxTasks were claimed, or claiming cannot go on.
func claimLoop(ctx context.Context, cfg Config, slots chan struct{}, start func(*client.Claim)) error {
	req := client.ClaimRequest{Queue: cfg.Queue, LeaseSeconds: cfg.LeaseSeconds}
	backoff := time.Second
	for claimed := 0; cfg.MaxTasks == 0 || claimed < cfg.MaxTasks; {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		cl, err := cfg.Client.WaitClaim(ctx, req)
		if err != nil {
			<-slots
			if ctx.Err() != nil {
				return nil
			}
			if client.IsUnauthorized(err) || client.IsForbidden(err) || client.ErrorCode(err) == client.CodeInvalidRequest {
				return fmt.Errorf("claim from %s: %w", cfg.Queue, err)
			}
			cfg.Log.Warn("claim failed; trying again", "queue", cfg.Queue, "err", err, "in", backoff)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, time.Minute)
			continue
		}
		backoff = time.Second
		claimed++
		cfg.Log.Info("task claimed", "task", cl.Task.ID, "run", cl.Lease.RunID, "attempt", cl.Task.Attempts, "title", cl.Task.Title)
		start(cl)
	}
	return nil
}
