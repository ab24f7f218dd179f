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
	"strings"
	"syscall"
)

const usage = `usage: tessera <command> [flags]

server:
  serve              run the server (see tessera serve -h)
  admin create-key   create an admin principal and key, offline
  bench rows         measure the storage rows each kind of request costs
  bench load         measure tasks/s over HTTP against a no-op baseline, and verify
  version            print the version

client (--url/TESSERA_URL, --key/TESSERA_KEY, -n/TESSERA_NAMESPACE, --json):
  tasks enqueue|list|get|cancel|pause|resume|retry
  counts             tasks by queue and state
  records put|get|list
  blobs put|get
  principals create|list
  keys create|list|revoke
  audit              your own audit trail (--all: everyone's, admin)
  work -- CMD ARGS   claim tasks and run CMD for each (see tessera work -h)

Each command takes -h. Every serve flag can also be set as TESSERA_<FLAG>
in the environment (e.g. --data is TESSERA_DATA). Exit codes: 0 ok,
1 failed, 2 bad usage or input, 3 not found, 4 conflict, 5 unauthorized
or forbidden, 6 try later (429/503), 7 server unreachable, 8 tessera work
stopped running commands when its drain ran out.
`

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "tessera:", err)
	}
	os.Exit(exitCode(err))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usagef("no command")
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stderr)
	case "admin":
		if len(args) < 2 || args[1] != "create-key" {
			fmt.Fprint(stderr, usage)
			return usagef("unknown admin command")
		}
		return adminCreateKey(ctx, args[2:], stdout, stderr)
	case "bench":
		return benchCmd(ctx, args[1:], stdout, stderr)
	case "tasks":
		return tasksCmd(ctx, args[1:], stdin, stdout, stderr)
	case "counts":
		return countsCmd(ctx, args[1:], stdout, stderr)
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
	case "version":
		fmt.Fprintln(stdout, version)
		return nil
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return usagef("unknown command %q", args[0])
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
