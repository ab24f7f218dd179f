package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/tessera-dev/tessera/client"
)

// auditCmd is `tessera audit`: the key's own trail, or with --all
// everyone's (admin key).
func auditCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("audit")
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
	var names map[string]string
	if !cn.json {
		names = principalNames(ctx, c, page)
	}
	return cn.print(page, func(w *tabwriter.Writer) {
		if len(page.Events) > 0 || len(page.Counters) == 0 {
			fmt.Fprintln(w, "TIME\tNAMESPACE\tPRINCIPAL\tNAME\tACTION\tTARGET\tSTATUS")
		}
		for _, e := range page.Events {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%d\n", e.Time.Format(time.DateTime), e.Namespace, e.PrincipalID, orDash(names[e.PrincipalID]),
				e.Action, orDash(e.Target), e.Status)
		}
		if len(page.Counters) > 0 {
			if len(page.Events) > 0 {
				fmt.Fprintln(w)
			}
			fmt.Fprintln(w, "MINUTE\tNAMESPACE\tPRINCIPAL\tNAME\tACTION\tOUTCOME\tCOUNT")
			for _, k := range page.Counters {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%d\n", k.Minute.Format(time.DateTime), k.Namespace, orDash(k.PrincipalID), orDash(names[k.PrincipalID]),
					k.Action, k.Outcome, k.Count)
			}
		}
	})
}

// maxNamePages bounds the principal pages read to name an audit page's
// principals (200 each), so a store full of anonymous sessions cannot
// make `tessera audit` slow; past it the ids stand alone.
const maxNamePages = 25

// principalNames names the principals of an audit page — display name,
// else account — as far as the key may know them: every principal for
// an admin key (from the principals list, read until all are found), its
// own otherwise. A failed lookup leaves the ids alone.
func principalNames(ctx context.Context, c *client.Client, page *client.AuditPage) map[string]string {
	wanted := map[string]bool{}
	for _, e := range page.Events {
		wanted[e.PrincipalID] = true
	}
	for _, k := range page.Counters {
		if k.PrincipalID != "" {
			wanted[k.PrincipalID] = true
		}
	}
	names := map[string]string{}
	if len(wanted) == 0 {
		return names
	}
	me, err := c.Me(ctx)
	if err != nil {
		return names
	}
	name := func(p client.Principal) {
		if wanted[p.ID] {
			names[p.ID] = cmp.Or(p.DisplayName, p.Account)
		}
	}
	name(me.Principal)
	if !slices.Contains(me.Scopes, "admin") {
		return names
	}
	p := client.Page{Limit: 200}
	for range maxNamePages {
		list, err := c.ListPrincipals(ctx, p)
		if err != nil {
			return names
		}
		for _, pr := range list.Principals {
			name(pr)
		}
		if len(names) == len(wanted) || list.NextCursor == "" {
			return names
		}
		p.Cursor = list.NextCursor
	}
	return names
}
