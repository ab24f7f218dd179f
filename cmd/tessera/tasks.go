package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tessera-dev/tessera/client"
	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// tasksCmd is `tessera tasks enqueue|list|get|graph|cancel|pause|resume|retry`.
func tasksCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	// change runs fn on each task named; a retry takes --dependents, which
	// runs withDependents instead.
	type changeFunc = func(*client.Client, context.Context, string) (*client.Task, error)
	change := func(verb string, fn, withDependents changeFunc) func([]string) error {
		return func(args []string) error {
			fs := newFlagSet("tasks " + verb)
			cn := connFlags(fs, stdout, stderr)
			var dependents *bool
			if withDependents != nil {
				dependents = fs.Bool("dependents", false, "also make the tasks its failure canceled wait for it again, and theirs in turn")
			}
			ids, c, err := cn.parse(fs, args, 1, -1)
			if err != nil {
				return err
			}
			if dependents != nil && *dependents {
				fn = withDependents
			}
			var tasks []*client.Task
			for _, id := range ids {
				t, err := fn(c, ctx, id)
				if err != nil {
					return fmt.Errorf("%s %s: %w", verb, id, err)
				}
				tasks = append(tasks, t)
			}
			return cn.print(tasks, func(w *tabwriter.Writer) {
				for _, t := range tasks {
					fmt.Fprintf(w, "%s\t%s\n", t.ID, t.State)
					if t.State == client.StateLeased && t.CancelRequested {
						fmt.Fprintf(cn.stderr, "%s is running: cancel requested; the worker holding it is told at its next heartbeat (at once if it watches claim events), which ends it as canceled (or its lease's lapse does)\n", t.ID)
					}
				}
			})
		}
	}
	return subcommand("tasks", args, map[string]func([]string) error{
		"enqueue": func(args []string) error { return tasksEnqueue(ctx, args, stdin, stdout, stderr) },
		"list":    func(args []string) error { return tasksList(ctx, args, stdout, stderr) },
		"get":     func(args []string) error { return tasksGet(ctx, args, stdout, stderr) },
		"cancel":  change("cancel", (*client.Client).CancelTask, nil),
		"pause":   change("pause", (*client.Client).PauseTask, nil),
		"resume":  change("resume", (*client.Client).ResumeTask, nil),
		"retry":   change("retry", (*client.Client).RetryTask, (*client.Client).RetryWithDependents),
		"graph":   func(args []string) error { return tasksGraph(ctx, args, stdout, stderr) },
		"answer":  func(args []string) error { return tasksAnswer(ctx, args, stdout, stderr) },
	}, stderr)
}

func tasksEnqueue(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("tasks enqueue")
	cn := connFlags(fs, stdout, stderr)
	var req client.EnqueueRequest
	var labels stringsFlag
	fs.StringVar(&req.Title, "title", "", "title (required)")
	fs.StringVar(&req.Queue, "queue", "default", "queue")
	fs.StringVar(&req.Brief, "brief", "", "instructions for the worker")
	payload := fs.String("payload", "", "payload: JSON, @FILE, or - for stdin")
	fs.Var(&labels, "label", "label (repeat, or comma-separated)")
	fs.IntVar(&req.Priority, "priority", 0, "priority: higher is claimed first")
	fs.BoolVar(&req.Public, "public", false, "show the task on the board")
	fs.IntVar(&req.MaxAttempts, "max-attempts", 0, "attempts before the task is dead (default 3)")
	runAt := fs.String("run-at", "", "RFC 3339 time before which the task is not claimed")
	var after stringsFlag
	fs.Var(&after, "after", "a task this one waits on: it stays waiting until all have succeeded (repeat, or comma-separated; at most 100)")
	var requires stringsFlag
	fs.Var(&requires, "requires", "a capability a worker must show to be granted the task, e.g. gpu or repo:foo (repeat, or comma-separated; at most 16)")
	fs.StringVar(&req.Group, "group", "", "who the task is for (a tenant, a repository): claims rotate across a queue's groups, whose leases and rate can be capped")
	fs.StringVar(&req.OnParentFailure, "on-parent-failure", "", `when a parent ends dead or canceled: "cancel" this task too (default) or "run" it anyway`)
	fs.StringVar(&req.UniqueKey, "unique-key", "", "keep one unfinished task per key in the queue: while one holds it, answer that task instead of a new one")
	debounceKey := fs.String("debounce-key", "", "gather enqueues of this key into one task while it has not been claimed (with --debounce-seconds)")
	debounceSeconds := fs.Int("debounce-seconds", 0, "with --debounce-key: run the task this long after the last enqueue of the key")
	debounceMax := fs.Int("debounce-max-seconds", 0, "with --debounce-key: run it no later than this long after the first")
	fs.StringVar(&req.IdempotencyKey, "idempotency-key", "", "Idempotency-Key (generated when empty)")
	quiet := fs.Bool("q", false, "print only the task id")
	_, c, err := cn.parse(fs, args, 0, 0)
	if err != nil {
		return err
	}
	if req.Title == "" {
		return usagef("tasks enqueue: --title is required")
	}
	req.Labels, req.After, req.Requires = labels, after, requires
	if *debounceKey != "" {
		req.Debounce = &client.Debounce{Key: *debounceKey, Seconds: *debounceSeconds, MaxSeconds: *debounceMax}
	}
	if *payload != "" {
		p, err := jsonArg("payload", *payload, stdin)
		if err != nil {
			return err
		}
		req.Payload = p
	}
	if *runAt != "" {
		t, err := time.Parse(time.RFC3339, *runAt)
		if err != nil {
			return usagef("--run-at: %v", err)
		}
		req.RunAt = &t
	}
	t, err := c.Enqueue(ctx, req)
	if err != nil {
		return err
	}
	switch {
	case t.Deduplicated:
		fmt.Fprintf(stderr, "tasks enqueue: task %s holds unique key %q and is not finished: no new task\n", t.ID, t.UniqueKey)
	case t.Debounced:
		fmt.Fprintf(stderr, "tasks enqueue: task %s, not yet claimed, holds debounce key %q: moved on to %s, no new task\n", t.ID, t.DebounceKey, t.RunAt.Format(time.RFC3339))
	}
	if *quiet {
		_, err := fmt.Fprintln(stdout, t.ID)
		return err
	}
	return cn.print(t, func(w *tabwriter.Writer) { taskRows(w, []client.Task{*t}) })
}

// tasksGraph prints the tasks enqueued after a task, and theirs in turn,
// as a tree under it.
func tasksGraph(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("tasks graph")
	cn := connFlags(fs, stdout, stderr)
	depth := fs.Int("depth", 10, "levels of dependents to show")
	ids, c, err := cn.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	root, err := c.GetTask(ctx, ids[0])
	if err != nil {
		return err
	}
	type node struct {
		Task     client.Task `json:"task"`
		Children []*node     `json:"dependents,omitempty"`
	}
	// A task reached twice (a diamond) is shown again, without its
	// dependents the second time.
	seen := map[string]bool{}
	var grow func(n *node, level int) error
	grow = func(n *node, level int) error {
		if level >= *depth || seen[n.Task.ID] {
			return nil
		}
		seen[n.Task.ID] = true
		p := client.Page{Limit: 200}
		for {
			page, err := c.Dependents(ctx, n.Task.ID, p)
			if err != nil {
				return err
			}
			for _, t := range page.Tasks {
				child := &node{Task: t}
				n.Children = append(n.Children, child)
				if err := grow(child, level+1); err != nil {
					return err
				}
			}
			if page.NextCursor == "" {
				return nil
			}
			p.Cursor = page.NextCursor
		}
	}
	tree := &node{Task: *root}
	if err := grow(tree, 0); err != nil {
		return err
	}
	return cn.print(tree, func(w *tabwriter.Writer) {
		var show func(n *node, indent string)
		show = func(n *node, indent string) {
			waiting := ""
			if d := n.Task.Dependency; d != nil && d.WaitingOn > 0 {
				waiting = fmt.Sprintf(" (waits on %d)", d.WaitingOn)
			}
			fmt.Fprintf(w, "%s%s\t%s%s\t%s\n", indent, n.Task.ID, n.Task.State, waiting, n.Task.Title)
			for _, ch := range n.Children {
				show(ch, indent+"  ")
			}
		}
		show(tree, "")
	})
}

func taskRows(w *tabwriter.Writer, tasks []client.Task) {
	fmt.Fprintln(w, "ID\tSTATE\tQUEUE\tATTEMPTS\tUPDATED\tTITLE")
	for _, t := range tasks {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d/%d\t%s\t%s\n", t.ID, t.State, t.Queue, t.Attempts, t.MaxAttempts,
			t.UpdatedAt.Format(time.DateTime), t.Title)
	}
}

func tasksList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("tasks list")
	cn := connFlags(fs, stdout, stderr)
	var f client.TaskFilter
	fs.StringVar(&f.State, "state", "", "only tasks in this state: "+strings.Join(tessera.States, ", "))
	fs.StringVar(&f.Queue, "queue", "", "only this queue")
	fs.StringVar(&f.Label, "label", "", "only tasks with this label")
	fs.IntVar(&f.Limit, "limit", 0, "tasks per page (1–200, default 50)")
	fs.StringVar(&f.Cursor, "cursor", "", "the page after this cursor")
	_, c, err := cn.parse(fs, args, 0, 0)
	if err != nil {
		return err
	}
	if f.State != "" && !slices.Contains(tessera.States, f.State) {
		return usagef("--state %q: want one of %s", f.State, strings.Join(tessera.States, ", "))
	}
	page, err := c.ListTasks(ctx, f)
	if err != nil {
		return err
	}
	cn.more(page.NextCursor)
	return cn.print(page, func(w *tabwriter.Writer) { taskRows(w, page.Tasks) })
}

func tasksGet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("tasks get")
	cn := connFlags(fs, stdout, stderr)
	ids, c, err := cn.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	t, err := c.GetTask(ctx, ids[0])
	if err != nil {
		return err
	}
	return cn.print(t, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "id\t%s\nnamespace\t%s\nqueue\t%s\ntitle\t%s\nstate\t%s\nattempts\t%d of %d\npriority\t%d\npublic\t%t\nlabels\t%s\nrun_at\t%s\n",
			t.ID, t.Namespace, t.Queue, t.Title, t.State, t.Attempts, t.MaxAttempts, t.Priority, t.Public,
			orDash(strings.Join(t.Labels, ",")), t.RunAt.Format(time.RFC3339))
		if len(t.Requires) > 0 {
			fmt.Fprintf(w, "requires\t%s\n", strings.Join(t.Requires, ","))
		}
		if t.Group != "" {
			fmt.Fprintf(w, "group\t%s\n", t.Group)
		}
		if t.UniqueKey != "" {
			fmt.Fprintf(w, "unique key\t%s\n", t.UniqueKey)
		}
		if t.DebounceKey != "" {
			fmt.Fprintf(w, "debounce key\t%s\n", t.DebounceKey)
		}
		for _, kv := range [][2]string{{"payload", string(t.Payload)}, {"progress", string(t.Progress)}, {"result", string(t.Result)}, {"error", t.Error}} {
			if kv[1] != "" && kv[1] != "null" {
				fmt.Fprintf(w, "%s\t%s\n", kv[0], oneLine(kv[1], 200))
			}
		}
		if t.CancelRequested {
			fmt.Fprintln(w, "cancel\trequested")
		}
		if l := t.Lease; l != nil {
			lapsed := ""
			if t.LeaseLapsed {
				lapsed = " (lapsed: back to its queue when a claim notices)"
			}
			fmt.Fprintf(w, "lease\trun %s, held by %s, expires %s%s\n", l.RunID, l.Holder, l.ExpiresAt.Format(time.RFC3339), lapsed)
		}
		if d := t.Dependency; d != nil {
			fmt.Fprintf(w, "after\t%s\nwaits on\t%d of %d (on a parent's failure: %s)\n", strings.Join(d.After, ","), d.WaitingOn, len(d.After), d.OnParentFailure)
		}
		if cp := t.Checkpoint; cp != nil {
			fmt.Fprintf(w, "checkpoint\t%s (attempt %d, %s)\n", oneLine(string(cp.Value), 200), cp.Attempt, cp.At.Format(time.RFC3339))
		}
		for _, g := range t.Gates {
			fmt.Fprintf(w, "gate %s\t%s %s: %s\n", g.Key, g.Kind, gateStatus(g), strconv.QuoteToGraphic(g.Message))
		}
		if len(t.Runs) > 0 {
			fmt.Fprintln(w, "\nRUN\tATTEMPT\tHOLDER\tSTARTED\tOUTCOME")
			for _, r := range t.Runs {
				fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\n", r.ID, r.Attempt, r.Holder, r.StartedAt.Format(time.DateTime), orDash(r.Outcome))
			}
		}
	})
}

// gateStatus says whether a gate is answered, how and by whom, or when
// it times out.
func gateStatus(g client.Gate) string {
	switch a := g.Answer; {
	case a != nil && a.AnsweredBy != "":
		return fmt.Sprintf("%s by %s at %s", a.Action, a.AnsweredBy, a.At.Format(time.RFC3339))
	case a != nil:
		return fmt.Sprintf("%s at %s", a.Action, a.At.Format(time.RFC3339))
	case g.TimeoutAt != nil:
		return fmt.Sprintf("open until %s (then %s)", g.TimeoutAt.Format(time.RFC3339), g.OnTimeout)
	}
	return "open"
}

// tasksAnswer is `tessera tasks answer ID KEY`: a person's answer to a
// gated task's gate, from the terminal.
func tasksAnswer(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("tasks answer")
	cn := connFlags(fs, stdout, stderr)
	content := fs.String("content", "", "a form gate's answer: a JSON object matching its schema")
	decline := fs.Bool("decline", false, "decline the gate (an answer: the task's next run decides what it means)")
	cancel := fs.Bool("cancel", false, "dismiss the gate without a choice")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: tessera tasks answer ID KEY [--content JSON | --decline | --cancel] [--json]\n\n"+
			"Answers gate KEY of gated task ID (POST /v1/tasks/{id}/gates/{key}): accept, with --content\n"+
			"for a form gate; --decline or --cancel otherwise. `tessera tasks get ID` shows its gates.")
		printFlags(fs)
	}
	args, c, err := cn.parse(fs, args, 2, 2)
	if err != nil {
		return err
	}
	req := client.GateAnswerRequest{Action: client.GateAccept}
	switch {
	case *decline && *cancel, (*decline || *cancel) && *content != "":
		return usagef("tasks answer: --content, --decline and --cancel exclude each other")
	case *decline:
		req.Action = client.GateDecline
	case *cancel:
		req.Action = client.GateCancel
	case *content != "":
		if !json.Valid([]byte(*content)) {
			return usagef("tasks answer: --content is not JSON")
		}
		req.Content = json.RawMessage(*content)
	}
	t, err := c.AnswerGate(ctx, args[0], args[1], req)
	if err != nil {
		return fmt.Errorf("answer %s %s: %w", args[0], args[1], err)
	}
	return cn.print(t, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "%s\t%s\n", t.ID, t.State)
	})
}

// oneLine shortens s to one line of at most n characters, for tables.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// countsCmd is `tessera counts`: tasks by queue and state.
func countsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("counts")
	cn := connFlags(fs, stdout, stderr)
	_, c, err := cn.parse(fs, args, 0, 0)
	if err != nil {
		return err
	}
	counts, err := c.Counts(ctx)
	if err != nil {
		return err
	}
	// Leases past their expiry that no claim noticed yet are counted
	// apart from the live ones (core.CountLapsed).
	states := slices.Insert(slices.Clone(tessera.States), slices.Index(tessera.States, tessera.StateLeased)+1, core.CountLapsed)
	queues := make([]string, 0, len(counts))
	for q := range counts {
		queues = append(queues, q)
	}
	slices.Sort(queues)
	return cn.print(map[string]any{"queues": counts}, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "QUEUE\t"+strings.ToUpper(strings.Join(states, "\t")))
		for _, q := range queues {
			fmt.Fprint(w, q)
			for _, s := range states {
				fmt.Fprintf(w, "\t%d", counts[q][s])
			}
			fmt.Fprintln(w)
		}
	})
}
