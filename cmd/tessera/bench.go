package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/tessera-dev/tessera/internal/bench"
)

const benchUsage = "usage: tessera bench rows [--json] [--store postgres://…] | tessera bench load [flags] (see tessera bench load -h)"

// benchCmd runs a built-in measurement: `tessera bench rows` or
// `tessera bench load`.
func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef(benchUsage)
	}
	switch args[0] {
	case "rows":
		return benchRows(ctx, args[1:], stdout, stderr)
	case "load":
		return benchLoad(ctx, args[1:], stdout, stderr)
	}
	return usagef(benchUsage)
}

func benchRows(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench rows")
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print a JSON array instead of a table")
	storeURL := fs.String("store", "sqlite", "measure on sqlite (a temporary file), or on a fresh schema of this postgres:// database")
	if err := fs.Parse(args); err != nil {
		return err
	}
	rows, err := bench.Rows(ctx, *storeURL)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, rows)
	}
	bench.WriteTable(stdout, rows)
	return nil
}

func benchLoad(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench load")
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: tessera bench load [flags]

Runs workers over loopback HTTP against a server it starts (this binary's
serve, on a temporary store, claim admission raised) or the one at --url,
measures tasks/s against a no-op Go handler driven by the same client in
the same run, and verifies from the API that no task was lost, submitted
twice or leased twice (exit 1 if one was).

`)
		printFlags(fs)
	}
	o := bench.LoadOptions{Progress: stderr}
	fs.IntVar(&o.Workers, "workers", 16, "workers, each with its own key and connection")
	fs.DurationVar(&o.Duration, "duration", 30*time.Second, "how long the load runs (with --backlog: the most the work-off may take; default until worked off)")
	fs.IntVar(&o.Backlog, "backlog", 0, "enqueue this many tasks first, then measure working them off")
	fs.IntVar(&o.Batch, "batch", 0, "with --backlog: work it off this many tasks a time (1–100), a batch claim and a batch submit each")
	fs.BoolVar(&o.Public, "public", false, "make the tasks public")
	heartbeat := fs.Bool("heartbeat", true, "heartbeat each claimed task before submitting it (false: claim → submit, as a job queue's worker fetches and completes a short job)")
	fs.StringVar(&o.Store, "store", "sqlite", "the started servers' --store: sqlite, or a PostgreSQL URL")
	fs.IntVar(&o.Nodes, "nodes", 1, "servers to start on the store (more than one needs PostgreSQL); workers spread round-robin")
	fs.StringVar(&o.URL, "url", "", "use the server at this URL instead of starting one")
	fs.StringVar(&o.Key, "key", "", "with --url: an admin key of that server")
	fs.IntVar(&o.PID, "pid", 0, "with --url: the server's process id, to read its memory and CPU from /proc")
	fs.DurationVar(&o.NoOpDuration, "noop-duration", 0, "how long the no-op baseline runs (default --duration, or 10s when the backlog is worked off to the end)")
	fs.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of the server over the middle of the run to this file (from its --debug-addr)")
	fs.StringVar(&o.DebugURL, "debug-url", "", "with --url and --cpuprofile: where that server serves its profiles (http://<its --debug-addr>)")
	asJSON := fs.Bool("json", false, "print the report as one JSON object")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usagef("%v", err)
	}
	if fs.NArg() > 0 {
		return usagef("bench load takes no arguments, got %q", fs.Args())
	}
	o.NoHeartbeat = !*heartbeat
	durationSet := false
	fs.Visit(func(f *flag.Flag) { durationSet = durationSet || f.Name == "duration" })
	if o.Backlog > 0 && !durationSet {
		o.Duration = 0
	}
	if o.URL == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find this binary to start as the server: %w", err)
		}
		o.Binary = exe
	}
	if err := o.Validate(); err != nil {
		return usagef("bench load: %v", err)
	}
	rep, err := bench.Load(ctx, o)
	if err != nil {
		return err
	}
	if *asJSON {
		if err := printJSON(stdout, rep); err != nil {
			return err
		}
	} else {
		bench.WriteLoad(stdout, rep)
	}
	if !rep.Verify.Pass {
		return errors.New("bench load: verification failed")
	}
	return nil
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
