package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/tessera-dev/tessera/client"
)

// Exit codes: what happened, for scripts (documented in docs/cli.md).
const (
	exitOK          = 0
	exitFailed      = 1 // anything else: a server fault, a local I/O error
	exitUsage       = 2 // the command line or its input was wrong (and 400/413)
	exitNotFound    = 3 // 404
	exitConflict    = 4 // 409: lease lost, version conflict, invalid state
	exitDenied      = 5 // 401/403: no valid key, or the key may not
	exitTryLater    = 6 // 429/503: rate limited, draining, allowance spent
	exitUnreachable = 7 // no answer from the server
	exitCutShort    = 8 // tessera work: a shutdown's drain ran out and running commands were stopped
)

// usageError is a mistake on the command line.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// errNoKey is a client command run without a key: said before any
// request, rather than as the server's 401.
var errNoKey = errors.New("no key: set TESSERA_KEY or --key (the server prints an admin key at its first start)")

// exitCode says what err means to a script.
func exitCode(err error) int {
	var ue *usageError
	var ce *client.Error
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue):
		return exitUsage
	case errors.Is(err, errNoKey):
		return exitDenied
	case errors.As(err, &ce):
		switch ce.Status {
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			return exitUsage
		case http.StatusNotFound:
			return exitNotFound
		case http.StatusConflict:
			return exitConflict
		case http.StatusUnauthorized, http.StatusForbidden:
			return exitDenied
		case http.StatusTooManyRequests, http.StatusServiceUnavailable:
			return exitTryLater
		}
		return exitFailed
	case errors.Is(err, client.ErrDrained):
		return exitCutShort
	case errors.Is(err, context.Canceled):
		return exitFailed
	}
	// A transport failure: the server did not answer.
	var te *url.Error
	if errors.As(err, &te) {
		return exitUnreachable
	}
	return exitFailed
}

// explain says a failure to reach the server in a person's terms: which
// server, and what to check. Other errors are as they are.
func explain(err error) error {
	var ce *client.Error
	var te *url.Error
	if errors.As(err, &ce) || !errors.As(err, &te) || errors.Is(err, context.Canceled) {
		return err
	}
	server := te.URL
	if u, perr := url.Parse(te.URL); perr == nil {
		server = u.Scheme + "://" + u.Host
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("no server at %s: connection refused (is tessera serve running there? --url or TESSERA_URL says where)", server)
	}
	return fmt.Errorf("no answer from %s: %w", server, te.Err)
}

// conn is what every client command shares: where the server is, the
// key, the namespace, and how to print.
type conn struct {
	url, key, namespace string
	json                bool
	stdout, stderr      io.Writer
	// log, when set, hears what the client does unasked (see
	// client.WithLogger).
	log *slog.Logger
}

// connFlags registers the shared flags on fs.
func connFlags(fs *flag.FlagSet, stdout, stderr io.Writer) *conn {
	c := &conn{stdout: stdout, stderr: stderr}
	fs.StringVar(&c.url, "url", client.DefaultURL, "server base URL (TESSERA_URL)")
	fs.StringVar(&c.key, "key", "", "API key tsk_… (TESSERA_KEY)")
	fs.StringVar(&c.namespace, "namespace", "main", "namespace (TESSERA_NAMESPACE)")
	fs.StringVar(&c.namespace, "n", "main", "short for --namespace")
	fs.BoolVar(&c.json, "json", false, "print the API's JSON instead of a table")
	fs.SetOutput(stderr)
	return c
}

// connEnv are the only flags read from the environment for client
// commands: a variable like TESSERA_QUEUE, which `tessera work` sets for
// its commands, must not change a command's flags unasked.
var connEnv = []string{"url", "key", "namespace"}

// parseCLI parses flags and positional arguments in any order (flags may
// follow them); everything after "--" is positional as is. It fills the
// connection flags not given from TESSERA_URL, TESSERA_KEY and
// TESSERA_NAMESPACE, and checks the number of positional arguments.
func parseCLI(fs *flag.FlagSet, args []string, minArgs, maxArgs int) ([]string, error) {
	var rest []string
	if i := slices.Index(args, "--"); i >= 0 {
		args, rest = args[:i], args[i+1:]
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, &usageError{err.Error()}
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	pos = append(pos, rest...)
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, name := range connEnv {
		env := "TESSERA_" + strings.ToUpper(name)
		if v, ok := os.LookupEnv(env); ok && !set[name] && fs.Lookup(name) != nil && !(name == "namespace" && set["n"]) {
			if err := fs.Set(name, v); err != nil {
				return nil, usagef("%s: %v", env, err)
			}
		}
	}
	if len(pos) < minArgs || (maxArgs >= 0 && len(pos) > maxArgs) {
		return nil, usagef("%s: wrong number of arguments (see %s -h)", fs.Name(), fs.Name())
	}
	return pos, nil
}

// parse parses the command line (parseCLI) and returns the positional
// arguments and the API client the flags describe.
func (c *conn) parse(fs *flag.FlagSet, args []string, minArgs, maxArgs int) ([]string, *client.Client, error) {
	pos, err := parseCLI(fs, args, minArgs, maxArgs)
	if err != nil {
		return nil, nil, err
	}
	cl, err := c.client()
	return pos, cl, err
}

// pageFlags registers --limit and --cursor of a listing.
func pageFlags(fs *flag.FlagSet, what string) *client.Page {
	var p client.Page
	fs.IntVar(&p.Limit, "limit", 0, what+" per page (1–200, default 50)")
	fs.StringVar(&p.Cursor, "cursor", "", "the page after this cursor")
	return &p
}

// client returns the API client the flags describe.
func (c *conn) client() (*client.Client, error) {
	if c.key == "" {
		return nil, errNoKey
	}
	cl, err := client.New(c.url, client.WithKey(c.key), client.WithNamespace(c.namespace),
		client.WithUserAgent("tessera-cli/"+version), client.WithLogger(c.log))
	if err != nil {
		return nil, usagef("--url: %v", err)
	}
	return cl, nil
}

// print writes v as indented JSON with --json, else calls table.
func (c *conn) print(v any, table func(w *tabwriter.Writer)) error {
	if c.json {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	var buf strings.Builder
	w := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
	table(w)
	if err := w.Flush(); err != nil {
		return err
	}
	_, err := io.WriteString(c.stdout, escapeBidi(buf.String()))
	return err
}

// escapeBidi writes the bidirectional formatting characters of free text
// (titles, names) as escapes: a terminal would apply them, and a title
// "\u202egnp.exe" would read "exe.png" in a table. JSON output keeps them,
// as the data it is.
func escapeBidi(s string) string {
	if !strings.ContainsFunc(s, isBidi) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if isBidi(r) {
			fmt.Fprintf(&b, "\\u%04X", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// isBidi reports the characters that reorder the text around them: the
// marks, embeddings, overrides and isolates of Unicode's bidi algorithm.
func isBidi(r rune) bool {
	return r == 0x061C || r == 0x200E || r == 0x200F || r >= 0x202A && r <= 0x202E || r >= 0x2066 && r <= 0x2069
}

// more tells a person there is a next page.
func (c *conn) more(cursor string) {
	if cursor != "" && !c.json {
		fmt.Fprintf(c.stderr, "more: --cursor %s\n", cursor)
	}
}

// jsonArg reads a JSON value given on the command line: the text itself,
// @FILE for a file's contents, or - for stdin.
func jsonArg(name, v string, stdin io.Reader) (json.RawMessage, error) {
	var b []byte
	var err error
	switch {
	case v == "-":
		b, err = io.ReadAll(io.LimitReader(stdin, 1<<20+1))
	case strings.HasPrefix(v, "@"):
		b, err = os.ReadFile(v[1:])
	default:
		b = []byte(v)
	}
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", name, err)
	}
	if !json.Valid(b) {
		return nil, usagef("--%s must be one JSON value (or @FILE, or - for stdin)", name)
	}
	return json.RawMessage(b), nil
}

// stringsFlag is a flag that may be given more than once; each value may
// also be a comma-separated list.
type stringsFlag []string

func (s *stringsFlag) String() string { return strings.Join(*s, ",") }
func (s *stringsFlag) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*s = append(*s, p)
		}
	}
	return nil
}

// subcommand dispatches "GROUP VERB ..." to its verb.
func subcommand(group string, args []string, verbs map[string]func([]string) error, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		names := make([]string, 0, len(verbs))
		for v := range verbs {
			names = append(names, v)
		}
		slices.Sort(names)
		fmt.Fprintf(stderr, "usage: tessera %s %s [flags] (tessera %s VERB -h for each)\n", group, strings.Join(names, "|"), group)
		if len(args) == 0 {
			return usagef("tessera %s: which one?", group)
		}
		return nil
	}
	fn, ok := verbs[args[0]]
	if !ok {
		return usagef("tessera %s: unknown command %q", group, args[0])
	}
	return fn(args[1:])
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
