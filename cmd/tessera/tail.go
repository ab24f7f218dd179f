package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/tessera-dev/tessera/client"
)

// tailCmd is `tessera tail`: the namespace's events as they happen, one
// line each, until interrupted (or --count events).
func tailCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("tail")
	cn := connFlags(fs, stdout, stderr)
	var f client.EventFilter
	fs.StringVar(&f.Queue, "queue", "", "only this queue's events")
	fs.StringVar(&f.Task, "task", "", "only this task's events")
	fs.StringVar(&f.After, "after", "", "resume after this event id (default: from now)")
	count := fs.Int("count", 0, "stop after this many events (default: follow until interrupted)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: tessera tail [--queue Q] [--task ID] [--after ID] [--count N] [--json]\n\n"+
			"Follows the namespace's events as they happen (GET /v1/events): tasks enqueued, claimed,\n"+
			"heartbeats, gated, gates answered and timed out, succeeded, failed, dead, canceled; queues\n"+
			"paused and resumed; records written.\n"+
			"A broken connection is resumed where it left off. --json prints each event as a JSON line.")
		printFlags(fs)
	}
	_, c, err := cn.parse(fs, args, 0, 0)
	if err != nil {
		return err
	}
	if *count < 0 {
		return usagef("tail: --count must be ≥ 0")
	}
	n := 0
	for ev, err := range c.Events(ctx, f) {
		if err != nil {
			return explain(err)
		}
		if cn.json {
			b, _ := json.Marshal(ev)
			if ev.Gap != nil {
				b, _ = json.Marshal(map[string]any{"kind": client.KindGap, "id": ev.ID, "gap": ev.Gap})
			}
			fmt.Fprintf(stdout, "%s\n", b)
		} else {
			fmt.Fprintln(stdout, tailLine(ev))
		}
		if n++; *count > 0 && n >= *count {
			return nil
		}
	}
	return nil
}

// tailLine is one event as a person reads it. The title is quoted:
// control and bidi-override characters come out escaped, so a title
// cannot rewrite the terminal line it is printed on.
func tailLine(ev client.Event) string {
	if ev.Gap != nil {
		return fmt.Sprintf("-- gap: %s", ev.Gap.Reason)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %-22s", ev.Time.UTC().Format("15:04:05.000"), ev.Kind)
	if ev.TaskID != "" {
		fmt.Fprintf(&b, "  %s", ev.TaskID)
	} else {
		fmt.Fprintf(&b, "  %s", strconv.Quote(ev.Target))
	}
	if ev.Queue != "" {
		fmt.Fprintf(&b, "  queue=%s", ev.Queue)
	}
	if ev.State != "" {
		fmt.Fprintf(&b, "  state=%s", ev.State)
	}
	if strings.HasPrefix(ev.Kind, "record.") || strings.HasPrefix(ev.Kind, "blob.") {
		fmt.Fprintf(&b, "  %s", strconv.Quote(ev.Target))
	}
	if ev.Title != "" {
		fmt.Fprintf(&b, "  %s", strconv.QuoteToGraphic(ev.Title))
	}
	return b.String()
}
