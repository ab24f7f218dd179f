package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tessera-dev/tessera/client"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// principalsCmd is `tessera principals create|list` (admin key).
func principalsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return subcommand("principals", args, map[string]func([]string) error{
		"create": func(args []string) error {
			fs := newFlagSet("principals create")
			cn := connFlags(fs, stdout, stderr)
			var req client.PrincipalRequest
			fs.StringVar(&req.Kind, "kind", "agent", "user, agent or service")
			fs.StringVar(&req.DisplayName, "display-name", "", "name shown on the board and the activity feed")
			fs.StringVar(&req.Account, "account", "", "owning account (free text)")
			quiet := fs.Bool("q", false, "print only the principal id")
			_, c, err := cn.parse(fs, args, 0, 0)
			if err != nil {
				return err
			}
			p, err := c.CreatePrincipal(ctx, req)
			if err != nil {
				return err
			}
			if *quiet {
				_, err := fmt.Fprintln(stdout, p.ID)
				return err
			}
			return cn.print(p, func(w *tabwriter.Writer) { principalRows(w, []client.Principal{*p}) })
		},
		"list": func(args []string) error {
			fs := newFlagSet("principals list")
			cn := connFlags(fs, stdout, stderr)
			p := pageFlags(fs, "principals")
			_, c, err := cn.parse(fs, args, 0, 0)
			if err != nil {
				return err
			}
			page, err := c.ListPrincipals(ctx, *p)
			if err != nil {
				return err
			}
			cn.more(page.NextCursor)
			return cn.print(page, func(w *tabwriter.Writer) { principalRows(w, page.Principals) })
		},
	}, stderr)
}

func principalRows(w *tabwriter.Writer, ps []client.Principal) {
	fmt.Fprintln(w, "ID\tKIND\tNAME\tACCOUNT\tLAST USED")
	for _, p := range ps {
		last := "-"
		if p.LastUsedAt != nil {
			last = p.LastUsedAt.Format(time.DateTime)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", p.ID, p.Kind, orDash(p.DisplayName), orDash(p.Account), last)
	}
}

// keysCmd is `tessera keys create|list|revoke` (admin key).
func keysCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return subcommand("keys", args, map[string]func([]string) error{
		"create": func(args []string) error {
			fs := newFlagSet("keys create")
			cn := connFlags(fs, stdout, stderr)
			var req client.KeyRequest
			var scopes stringsFlag
			fs.StringVar(&req.PrincipalID, "principal", "", "the principal the key acts as (required)")
			fs.Var(&scopes, "scope", "a scope: read, enqueue, claim, write, admin, namespace:NAME, namespace:* (repeat, or comma-separated)")
			expires := fs.Duration("expires-in", 0, "the key stops working after this long (e.g. 720h; 0: never)")
			quiet := fs.Bool("q", false, "print only the key")
			_, c, err := cn.parse(fs, args, 0, 0)
			if err != nil {
				return err
			}
			if req.PrincipalID == "" || len(scopes) == 0 {
				return usagef("keys create: --principal and at least one --scope are required")
			}
			req.Scopes = scopes
			if *expires > 0 {
				t := time.Now().Add(*expires).UTC()
				req.ExpiresAt = &t
			}
			k, err := c.CreateKey(ctx, req)
			if err != nil {
				return err
			}
			if lacks := uselessKey(req.Scopes); lacks != "" {
				fmt.Fprintf(stderr, "warning: this key can do nothing: it has %s\n", lacks)
			}
			if *quiet {
				_, err := fmt.Fprintln(stdout, k.Secret)
				return err
			}
			fmt.Fprintln(stderr, "the key is shown only this once")
			return cn.print(k, func(w *tabwriter.Writer) {
				keyRows(w, []client.Key{k.Key})
				fmt.Fprintf(w, "\nkey\t%s\n", k.Secret)
			})
		},
		"list": func(args []string) error {
			fs := newFlagSet("keys list")
			cn := connFlags(fs, stdout, stderr)
			p := pageFlags(fs, "keys")
			_, c, err := cn.parse(fs, args, 0, 0)
			if err != nil {
				return err
			}
			page, err := c.ListKeys(ctx, *p)
			if err != nil {
				return err
			}
			cn.more(page.NextCursor)
			return cn.print(page, func(w *tabwriter.Writer) { keyRows(w, page.Keys) })
		},
		"revoke": func(args []string) error {
			fs := newFlagSet("keys revoke")
			cn := connFlags(fs, stdout, stderr)
			ids, c, err := cn.parse(fs, args, 1, -1)
			if err != nil {
				return err
			}
			for _, id := range ids {
				if err := c.RevokeKey(ctx, id); err != nil {
					return fmt.Errorf("revoke %s: %w", id, err)
				}
				if !cn.json {
					fmt.Fprintf(stdout, "%s\trevoked\n", id)
				}
			}
			return nil
		},
	}, stderr)
}

// uselessKey says what a key with these scopes lacks to do anything — an
// action, or a namespace to act in — or "" when it lacks neither (admin
// implies both).
func uselessKey(scopes tessera.Scopes) string {
	if scopes.Admin() {
		return ""
	}
	actions := []tessera.Action{tessera.ActionRead, tessera.ActionEnqueue, tessera.ActionClaim, tessera.ActionWrite}
	var lacks []string
	if !slices.ContainsFunc(actions, scopes.Allows) {
		lacks = append(lacks, "no action scope (read, enqueue, claim or write)")
	}
	if !slices.ContainsFunc(scopes, func(s string) bool { return strings.HasPrefix(s, "namespace:") }) {
		lacks = append(lacks, "no namespace grant (namespace:NAME, or namespace:* for all)")
	}
	return strings.Join(lacks, " and ")
}

func keyRows(w *tabwriter.Writer, ks []client.Key) {
	fmt.Fprintln(w, "ID\tPRINCIPAL\tSCOPES\tEXPIRES\tREVOKED")
	for _, k := range ks {
		exp, rev := "-", "-"
		if k.ExpiresAt != nil {
			exp = k.ExpiresAt.Format(time.DateTime)
		}
		if k.RevokedAt != nil {
			rev = k.RevokedAt.Format(time.DateTime)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", k.ID, k.PrincipalID, strings.Join(k.Scopes, ","), exp, rev)
	}
}
