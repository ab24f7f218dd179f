// Command tessera is the Tessera server and its tools. This package holds
// flags and wiring only; everything else lives under internal/.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
)

const usage = `usage: tessera [client flags] <command> [flags]

server:
  serve              run the server (see tessera serve -h)
  admin create-key   create an admin principal and key, offline
  admin blobs migrate  move a node's blob bytes into the PostgreSQL store
  bench rows         measure the storage rows each kind of request costs
  bench load         measure tasks/s over HTTP against a no-op baseline, and verify
  version            print the version and commit (also tessera --version)

client (--url/TESSERA_URL, --key/TESSERA_KEY, -n/TESSERA_NAMESPACE, --json,
before or after the command):
  tasks enqueue|list|get|graph|answer|cancel|pause|resume|retry
  counts             tasks by queue and state
  queues fleet|settings|group  a queue's fleet view, its settings, a group's
  records put|get|list
  blobs put|get
  principals create|list
  keys create|list|revoke
  audit              your own audit trail (--all: everyone's, admin)
  tail               follow the namespace's events as they happen
  work -- CMD ARGS   claim tasks and run CMD for each (see tessera work -h)

Each command takes -h. Every serve flag can also be set as TESSERA_<FLAG>
in the environment (e.g. --data is TESSERA_DATA). Exit codes: 0 ok,
1 failed, 2 bad usage or input, 3 not found, 4 conflict, 5 unauthorized
or forbidden, 6 try later (429/503), 7 server unreachable, 8 tessera work
stopped running commands when its drain ran out.
`

// version is set at build time with -ldflags "-X main.version=...";
// otherwise it is the module version the go command stamped (from the
// VCS for a build in a checkout), or "dev".
var version = "dev"

func init() {
	if bi, ok := debug.ReadBuildInfo(); ok && version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		version = bi.Main.Version
	}
}

// versionLine is what `tessera version` prints: the version, the commit
// built from (and whether the checkout had changes) when the go command
// stamped it, and the Go version.
func versionLine(bi *debug.BuildInfo) string {
	line := "tessera " + version
	if bi == nil {
		return line
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if rev := settings["vcs.revision"]; rev != "" {
		line += " commit " + rev
		if settings["vcs.modified"] == "true" {
			line += " (modified)"
		}
		if t := settings["vcs.time"]; t != "" {
			line += " of " + t
		}
	}
	return line + " " + bi.GoVersion
}

// buildInfo is the binary's build information, nil when it has none.
func buildInfo() *debug.BuildInfo {
	bi, _ := debug.ReadBuildInfo()
	return bi
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "tessera:", explain(err))
	}
	os.Exit(exitCode(err))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	args, err := globalFlags(args, stdout, stderr)
	if err != nil {
		return err
	}
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usagef("no command")
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stderr)
	case "admin":
		switch {
		case len(args) >= 2 && args[1] == "create-key":
			return adminCreateKey(ctx, args[2:], stdout, stderr)
		case len(args) >= 3 && args[1] == "blobs" && args[2] == "migrate":
			return adminBlobsMigrate(ctx, args[3:], stdout, stderr)
		}
		fmt.Fprint(stderr, usage)
		return usagef("unknown admin command")
	case "bench":
		return benchCmd(ctx, args[1:], stdout, stderr)
	case "tasks":
		return tasksCmd(ctx, args[1:], stdin, stdout, stderr)
	case "counts":
		return countsCmd(ctx, args[1:], stdout, stderr)
	case "queues":
		return queuesCmd(ctx, args[1:], stdout, stderr)
	case "records":
		return recordsCmd(ctx, args[1:], stdin, stdout, stderr)
	case "blobs":
		return blobsCmd(ctx, args[1:], stdin, stdout, stderr)
	case "principals":
		return principalsCmd(ctx, args[1:], stdout, stderr)
	case "keys":
		return keysCmd(ctx, args[1:], stdout, stderr)
	case "audit":
		return auditCmd(ctx, args[1:], stdout, stderr)
	case "work":
		return workCmd(ctx, args[1:], stdout, stderr)
	case "tail":
		return tailCmd(ctx, args[1:], stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, versionLine(buildInfo()))
		return nil
	case "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return usagef("unknown command %q", args[0])
}

// groups are the commands whose first argument is a verb.
var groups = map[string]bool{"tasks": true, "queues": true, "records": true, "blobs": true, "principals": true, "keys": true, "admin": true, "bench": true}

// globalFlags reads the flags before the command — the client
// commands' --url, --key, -n/--namespace and --json, and --version and
// -h — and moves the client flags behind the command (and its verb), so
// `tessera -n build tasks enqueue …` is `tessera tasks enqueue -n build …`
// and a flag given again after the command wins.
func globalFlags(args []string, stdout, stderr io.Writer) ([]string, error) {
	fs := newFlagSet("tessera")
	_ = connFlags(fs, stdout, stderr)
	fs.SetOutput(io.Discard) // the usage below says more than the flags
	showVersion := fs.Bool("version", false, "print the version")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			return nil, err
		}
		fmt.Fprint(stderr, usage)
		return nil, usagef("%v", err)
	}
	if *showVersion {
		return []string{"version"}, nil
	}
	rest := fs.Args()
	var moved []string
	fs.Visit(func(f *flag.Flag) { moved = append(moved, "--"+f.Name+"="+f.Value.String()) })
	if len(moved) == 0 || len(rest) == 0 {
		return rest, nil
	}
	at := 1
	if groups[rest[0]] {
		if len(rest) < 2 || strings.HasPrefix(rest[1], "-") {
			return rest, nil // no verb: the group's usage says what is missing
		}
		at = 2
	}
	return slices.Concat(rest[:at], moved, rest[at:]), nil
}

// stdin is what commands that read input (--payload -, records put)
// read; a variable so tests can give input.
var stdin io.Reader = os.Stdin

// parseFlags parses args, then fills every flag not given on the command
// line from TESSERA_<NAME> in the environment.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &usageError{err.Error()}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		env := "TESSERA_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok && !set[f.Name] && err == nil {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s: %w", env, e)
			}
		}
	})
	return err
}

// printFlags lists a command's flags as they are spelled on the command
// line (--name), with their meaning and default.
func printFlags(fs *flag.FlagSet) {
	w := fs.Output()
	fs.VisitAll(func(f *flag.Flag) {
		kind, usage := flag.UnquoteUsage(f)
		name := "--" + f.Name
		if len(f.Name) == 1 {
			name = "-" + f.Name
		}
		if kind != "" {
			name += " " + kind
		}
		fmt.Fprintf(w, "  %s\n    \t%s", name, strings.ReplaceAll(usage, "\n", "\n    \t"))
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "[]" {
			fmt.Fprintf(w, " (default %q)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
}

// newFlagSet is a command's flags, whose -h prints a usage line and the
// flags as printFlags spells them; a command with more to say sets its
// own Usage.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: tessera %s [flags]\n\nflags:\n", name)
		printFlags(fs)
	}
	return fs
}
