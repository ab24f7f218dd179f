package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/tessera-dev/tessera/client"
)

// recordsCmd is `tessera records put|get|list`.
func recordsCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return subcommand("records", args, map[string]func([]string) error{
		"put":  func(args []string) error { return recordsPut(ctx, args, stdin, stdout, stderr) },
		"get":  func(args []string) error { return recordsGet(ctx, args, stdout, stderr) },
		"list": func(args []string) error { return recordsList(ctx, args, stdout, stderr) },
	}, stderr)
}

func recordsPut(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("records put")
	cn := connFlags(fs, stdout, stderr)
	value := fs.String("value", "-", "the value: JSON, @FILE, or - for stdin")
	ifVersion := fs.String("if-version", "", "write only if the head is this version (0: only if new)")
	var req client.PutRecordRequest
	fs.StringVar(&req.LeaseToken, "lease-token", "", "bind the version to this lease's run (tessera work sets TESSERA_LEASE_TOKEN)")
	fs.StringVar(&req.IdempotencyKey, "idempotency-key", "", "Idempotency-Key (generated when empty)")
	pos, c, err := cn.parse(fs, args, 2, 2)
	if err != nil {
		return err
	}
	v, err := jsonArg("value", *value, stdin)
	if err != nil {
		return err
	}
	req.Value = v
	if *ifVersion != "" {
		n, err := strconv.ParseInt(*ifVersion, 10, 64)
		if err != nil {
			return usagef("--if-version: %v", err)
		}
		req.IfVersion = &n
	}
	rec, err := c.PutRecord(ctx, pos[0], pos[1], req)
	if err != nil {
		return err
	}
	return cn.print(rec, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "%s/%s\tversion %d\n", rec.Bucket, rec.Key, rec.Version)
	})
}

func recordsGet(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("records get")
	cn := connFlags(fs, stdout, stderr)
	version := fs.Int64("version", 0, "this version rather than the head")
	pos, c, err := cn.parse(fs, args, 2, 2)
	if err != nil {
		return err
	}
	rec, err := c.GetRecord(ctx, pos[0], pos[1], *version)
	if err != nil {
		return err
	}
	if cn.json {
		return cn.print(rec, nil)
	}
	// A person (or a pipe) wants the value itself.
	_, err = fmt.Fprintln(stdout, string(rec.Value))
	return err
}

func recordsList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("records list")
	cn := connFlags(fs, stdout, stderr)
	prefix := fs.String("prefix", "", "only keys starting with this")
	p := pageFlags(fs, "records")
	pos, c, err := cn.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	page, err := c.ListRecords(ctx, pos[0], *prefix, *p)
	if err != nil {
		return err
	}
	cn.more(page.NextCursor)
	return cn.print(page, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "KEY\tVERSION\tWRITTEN\tRUN\tVALUE")
		for _, r := range page.Records {
			fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\n", r.Key, r.Version, r.CreatedAt.Format(time.DateTime), orDash(r.RunID), oneLine(string(r.Value), 60))
		}
	})
}
