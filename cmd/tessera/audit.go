package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/tessera-dev/tessera/client"
)

// auditCmd is `tessera audit`: the key's own trail, or with --all
// everyone's (admin key).
func auditCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	cn := connFlags(fs, stdout, stderr)
	all := fs.Bool("all", false, "everyone's trail (admin key), not only the key's own")
	var f client.AuditFilter
	fs.StringVar(&f.Namespace, "in", "", "with --all: only this namespace")
	fs.StringVar(&f.Principal, "principal", "", "with --all: only this principal id")
	fs.StringVar(&f.Action, "action", "", "only this action, e.g. task.enqueue")
	fs.StringVar(&f.Outcome, "outcome", "", "counters with this outcome, e.g. forbidden or empty")
	since := fs.Duration("since", 0, "only the last this long (at most 24h)")
	fs.IntVar(&f.Limit, "limit", 0, "events per page (1–200, default 50)")
	fs.StringVar(&f.Cursor, "cursor", "", "the page after this cursor")
	_, c, err := cn.parse(fs, args, 0, 0)
	if err != nil {
		return err
	}
	if !*all && (f.Namespace != "" || f.Principal != "") {
		return usagef("audit: --in and --principal need --all")
	}
	if *since > 0 {
		t := time.Now().Add(-*since)
		f.Since = &t
	}
	read := c.MyAudit
	if *all {
		read = c.AdminAudit
	}
	page, err := read(ctx, f)
	if err != nil {
		return err
	}
	cn.more(page.NextCursor)
	return cn.print(page, func(w *tabwriter.Writer) {
		if len(page.Events) > 0 || len(page.Counters) == 0 {
			fmt.Fprintln(w, "TIME\tNAMESPACE\tPRINCIPAL\tACTION\tTARGET\tSTATUS")
		}
		for _, e := range page.Events {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\n", e.Time.Format(time.DateTime), e.Namespace, e.PrincipalID, e.Action, orDash(e.Target), e.Status)
		}
		if len(page.Counters) > 0 {
			if len(page.Events) > 0 {
				fmt.Fprintln(w)
			}
			fmt.Fprintln(w, "MINUTE\tNAMESPACE\tPRINCIPAL\tACTION\tOUTCOME\tCOUNT")
			for _, k := range page.Counters {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\n", k.Minute.Format(time.DateTime), k.Namespace, orDash(k.PrincipalID), k.Action, k.Outcome, k.Count)
			}
		}
	})
}
