package main

import (
	"context"
	"flag"
	"io"
	"time"

	"github.com/tessera-dev/tessera/internal/runner"
)

// workCmd is `tessera work [flags] -- CMD ARGS...`: the worker runner
// (internal/runner). SIGTERM or SIGINT (ctx) starts its drain.
func workCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("work", flag.ContinueOnError)
	cn := connFlags(fs, stdout, stderr)
	cfg := runner.Config{Stderr: stderr}
	fs.StringVar(&cfg.Queue, "queue", "default", "queue to claim from")
	fs.IntVar(&cfg.Concurrency, "concurrency", 1, "commands run at once")
	lease := fs.Duration("lease", runner.DefaultLeaseSeconds*time.Second, "lease of each claim (10s–1h); heartbeats come at a third of it")
	fs.DurationVar(&cfg.Drain, "drain", runner.DefaultDrain, "on SIGTERM: how long running commands may finish before they are stopped and their tasks released")
	fs.DurationVar(&cfg.Grace, "grace", runner.DefaultGrace, "between SIGTERM and SIGKILL of a command that is stopped")
	fs.IntVar(&cfg.MaxTasks, "max-tasks", 0, "exit after this many tasks (0: run until stopped)")
	logFormat := fs.String("log-format", "text", "log format: text or json")
	cmd, c, err := cn.parse(fs, args, 1, -1)
	if err != nil {
		return err
	}
	if *lease < 10*time.Second || *lease > time.Hour {
		return usagef("work: --lease must be 10s–1h")
	}
	if cfg.Concurrency < 1 || cfg.MaxTasks < 0 || cfg.Drain < 0 || cfg.Grace < 0 {
		return usagef("work: --concurrency must be ≥ 1; --max-tasks, --drain and --grace ≥ 0")
	}
	cfg.Client = c
	cfg.Command = cmd
	cfg.LeaseSeconds = int(*lease / time.Second)
	// Commands reach the same server with the same key, so they can
	// write records and blobs under TESSERA_LEASE_TOKEN.
	cfg.Env = []string{"TESSERA_URL=" + cn.url, "TESSERA_KEY=" + cn.key}
	cfg.Log = newLogger(*logFormat, stderr)
	return runner.Run(ctx, cfg)
}
