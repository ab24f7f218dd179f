package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/tessera-dev/tessera/internal/app"
	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// adminCreateKey creates an admin principal and key in an existing store
// directly, without a running server, and prints the key.
func adminCreateKey(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("admin create-key")
	fs.SetOutput(stderr)
	data := fs.String("data", "./tessera-data", "data directory of a store on SQLite")
	storeKind := fs.String("store", "sqlite", "the store: sqlite (in --data), or the postgres:// URL the nodes serve from")
	name := fs.String("display-name", "admin", "display name of the new principal")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	db, closeDB, err := app.OpenExisting(ctx, app.Options{DataDir: *data, Store: *storeKind})
	if err != nil {
		return err
	}
	defer closeDB()
	key, err := core.CreateAdminKey(ctx, db, tessera.SystemClock{}, os.Getenv("TESSERA_ADMIN_KEY"), *name)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, key)
	return nil
}

// adminBlobsMigrate copies the blob bytes of a node's data directory into
// the byte store every node reads (app.MigrateBlobs).
func adminBlobsMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("admin blobs migrate")
	fs.SetOutput(stderr)
	data := fs.String("data", "./tessera-data", "data directory of the node whose blob bytes (--data/blobs) move")
	storeURL := fs.String("store", "", "the store the nodes serve from (--store of tessera serve): its postgres:// URL, or sqlite (in --data)")
	blobsTo := fs.String("blobs", "", "where the bytes go (--blobs of tessera serve): postgres (the --store database; the default with a postgres:// --store) or an s3://bucket/prefix?endpoint=… URL")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	done, err := app.MigrateBlobs(ctx, app.Options{DataDir: *data, Store: *storeURL, Blobs: *blobsTo}, stdout)
	fmt.Fprintf(stdout, "%d moved, %d already there, %d named by no blob and left\n", done.Moved, done.Present, done.Unnamed)
	return err
}
