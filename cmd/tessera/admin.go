package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/store/sqlite"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// adminCreateKey creates an admin principal and key against the data
// directory directly, without a running server, and prints the key.
func adminCreateKey(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("admin create-key", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", "./tessera-data", "data directory")
	name := fs.String("display-name", "admin", "display name of the new principal")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := os.MkdirAll(*data, 0o700); err != nil {
		return err
	}
	clock := tessera.SystemClock{}
	db, err := sqlite.Open(ctx, filepath.Join(*data, "tessera.db"), meter.New(clock))
	if err != nil {
		return err
	}
	defer db.Close()
	key, err := core.CreateAdminKey(ctx, db, clock, os.Getenv("TESSERA_ADMIN_KEY"), *name)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, key)
	return nil
}
