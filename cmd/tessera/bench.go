package main

import (
	"context"
	"encoding/json"
	"flag"
	"io"

	"github.com/tessera-dev/tessera/internal/bench"
)

// benchCmd runs a built-in measurement: `tessera bench rows [--json]
// [--store URL]`.
func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "rows" {
		return usagef("usage: tessera bench rows [--json] [--store postgres://…]")
	}
	fs := flag.NewFlagSet("bench rows", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print a JSON array instead of a table")
	storeURL := fs.String("store", "sqlite", "measure on sqlite (a temporary file), or on a fresh schema of this postgres:// database")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	rows, err := bench.Rows(ctx, *storeURL)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	bench.WriteTable(stdout, rows)
	return nil
}
