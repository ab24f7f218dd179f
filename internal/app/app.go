// Package app assembles one Tessera server from its parts — meter, store,
// blob bytes, core, HTTP API — so the serve command, the benchmarks and the
// end-to-end tests all run exactly the same wiring.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/blobfs"
	"github.com/tessera-dev/tessera/internal/blobs"
	"github.com/tessera-dev/tessera/internal/blobs3"
	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/httpapi"
	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/store/postgres"
	"github.com/tessera-dev/tessera/internal/store/sqlite"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// KeyCacheTTL is how long a key resolution is trusted (SPEC §4: ≤ 5 s).
const KeyCacheTTL = 5 * time.Second

// Options configure an App.
type Options struct {
	// DataDir holds the SQLite file, the blob bytes and the meter's file.
	DataDir string
	// Store is the backend: "" or "sqlite" for the SQLite file in DataDir,
	// or a postgres:// (postgresql://) URL, which several nodes may share.
	Store string
	// Blobs is where blob bytes live: "local" (DataDir/blobs),
	// "postgres" (the PostgreSQL store's database) or an
	// s3://bucket/prefix?endpoint=… URL (an S3-compatible object store,
	// package blobs3); "" picks postgres with a PostgreSQL store, local
	// with SQLite.
	Blobs string
	Clock tessera.Clock
	Core  core.Config
	HTTP  httpapi.Config
	// Allowance is the daily storage allowance from flags (0 = unlimited).
	Allowance meter.Allowance
	// AdminKey, when set, is seeded as an admin key (TESSERA_ADMIN_KEY).
	AdminKey string
	Log      *slog.Logger
}

// App is one assembled server.
type App struct {
	Meter *meter.Meter
	Store store.Store
	Core  *core.Service
	API   *httpapi.Server
	// CreatedKey is the admin key made on the first start of an empty
	// store, to be shown once; "" otherwise.
	CreatedKey string
	// Refused is set when the store could not be opened because the
	// storage allowance refused it, or storage was unavailable (a full
	// disk): the app serves discovery, and the same error for the rest.
	Refused error
	// Where says where the store lives, for the start line: "sqlite" and
	// the file's path, or "postgres" with host, port, database and schema
	// (never a password).
	Where string
	// BlobsWhere says where blob bytes live, for the start line.
	BlobsWhere string

	closeStore func() error
	stopMeter  func()
	unlock     func()
}

// Open assembles an App. A store the allowance refuses to create is not an
// error: the App then answers discovery and the honest 503 (SPEC §13).
// The SQLite store's data directory is locked (LockDataDir) until Close.
func Open(ctx context.Context, o Options) (*App, error) {
	if o.Clock == nil {
		o.Clock = tessera.SystemClock{}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return nil, err
	}
	unlock := func() {}
	if isSQLite(o.Store) {
		var err error
		if unlock, err = LockDataDir(o.DataDir); err != nil {
			return nil, err
		}
	}
	m, err := meter.Open(filepath.Join(o.DataDir, "meter.json"), o.Clock, o.Allowance)
	if err != nil {
		unlock()
		return nil, err
	}
	a := &App{Meter: m, closeStore: func() error { return nil }, stopMeter: func() {}, unlock: unlock}
	db, where, err := openStore(ctx, o, m, false)
	a.Where = where
	switch {
	case err == nil:
		a.Store, a.closeStore = db, db.Close
		// From here the day's totals are the deployment's, kept in the
		// store; the file only caches them. The ledger is attached even
		// when its first sync fails, which keeps its rows for the next.
		if err := m.Attach(ctx, db); err != nil {
			o.Log.Warn("meter totals not synced at start-up; kept for the next sync", "err", err)
		}
		a.CreatedKey, err = core.Bootstrap(ctx, db, o.Clock, o.AdminKey)
		// Storage that cannot serve for now (a full disk) is no reason
		// not to start: the store stays open and answers 503 until it can.
		if store.IsUnavailable(err) {
			o.Log.Warn("storage unavailable at start-up; serving, with 503 until it can write", "err", err)
			err = nil
		}
		if err != nil {
			db.Close()
			return nil, err
		}
	case tessera.ErrorCode(err) == tessera.CodeStorageQuotaExhausted,
		// A SQLite file that cannot be opened (a full disk) leaves the
		// server answering discovery and 503; an unreachable PostgreSQL
		// at start-up stays an error, for the supervisor to retry.
		store.IsUnavailable(err) && isSQLite(o.Store):
		a.Refused = err
		a.Store = store.Refusing(err)
	default:
		unlock()
		return nil, err
	}
	if o.Core.PublicURL == "" {
		o.Core.PublicURL = o.HTTP.PublicURL
	}
	if o.Core.Log == nil {
		o.Core.Log = o.Log
	}
	a.Core = core.New(a.Store, auth.NewAuthenticator(a.Store, o.Clock, KeyCacheTTL), m, o.Clock, o.Core)
	bytes, err := openBlobs(ctx, o, db)
	if err == nil {
		a.Core.SetBlobs(bytes)
		a.BlobsWhere = bytes.Where()
		a.API, err = httpapi.New(a.Core, o.Log, o.HTTP)
	}
	if err != nil {
		a.Close()
		return nil, err
	}
	// This node's rows reach the shared totals every few seconds and at
	// Close; a crash forgets at most that much counting.
	persistCtx, cancel := context.WithCancel(context.Background())
	persisted := make(chan struct{})
	go func() {
		m.Persist(persistCtx, 2*time.Second, func(err error) { o.Log.Warn("meter totals not synced", "err", err) })
		close(persisted)
	}()
	a.stopMeter = func() { cancel(); <-persisted }
	return a, nil
}

// backend is what App needs of a store: the seam, the meter's ledger, and
// closing.
type backend interface {
	store.Store
	meter.Ledger
}

// openStore opens the backend o names, and says where it lives. With
// existing it refuses to make a store where there is none (an operator's
// tool pointed at a mistyped --data or schema says so).
func openStore(ctx context.Context, o Options, m *meter.Meter, existing bool) (backend, string, error) {
	switch {
	case isSQLite(o.Store):
		path, err := filepath.Abs(filepath.Join(o.DataDir, "tessera.db"))
		if err != nil {
			return nil, "", err
		}
		if _, err := os.Stat(path); existing && err != nil {
			return nil, "sqlite " + path, fmt.Errorf("no store in %s (%w): start `tessera serve --data %s` once to make one, or name another with --data or --store", o.DataDir, err, o.DataDir)
		}
		db, err := sqlite.Open(ctx, path, m)
		if err != nil {
			return nil, "sqlite " + path, err // not a typed nil in an interface
		}
		return db, "sqlite " + path, nil
	case strings.HasPrefix(o.Store, "postgres://") || strings.HasPrefix(o.Store, "postgresql://"):
		opts := []postgres.Option{postgres.WithLogger(o.Log)}
		if existing {
			opts = append(opts, postgres.Existing())
		}
		db, err := postgres.Open(ctx, o.Store, m, opts...)
		if err != nil {
			return nil, "postgres", err
		}
		return db, db.Where(), nil
	}
	return nil, "", fmt.Errorf("store %q: want sqlite or a postgres:// URL", o.Store)
}

// openBlobs opens where blob bytes live (Options.Blobs). With several
// nodes on one PostgreSQL database, bytes on a node's disk are that
// node's alone, hence the default.
func openBlobs(ctx context.Context, o Options, db store.Store) (blobs.Bytes, error) {
	shared, inDB := db.(interface{ Blobs() blobs.Bytes })
	kind := o.Blobs
	if kind == "" {
		kind = "local"
		if inDB {
			kind = "postgres"
		}
	}
	switch kind {
	case "local":
		return blobfs.Open(filepath.Join(o.DataDir, "blobs"))
	case "postgres":
		if !inDB {
			return nil, errors.New("--blobs postgres keeps blob bytes in the --store database: it needs a postgres:// --store")
		}
		return shared.Blobs(), nil
	}
	if strings.HasPrefix(kind, "s3://") {
		return blobs3.Open(ctx, kind)
	}
	return nil, fmt.Errorf("--blobs %q: want local, postgres or an s3:// URL", kind)
}

// isSQLite reports whether store names the SQLite store in the data
// directory.
func isSQLite(store string) bool { return store == "" || store == "sqlite" }

// Close stops the core (ending long-polls, writing buffered counters), syncs
// the meter and closes the store.
func (a *App) Close() error {
	if a.Core != nil {
		a.Core.Close()
	}
	a.stopMeter()
	err := errors.Join(a.Meter.Sync(context.Background()), a.closeStore())
	a.unlock()
	return err
}

// OpenExisting opens the store o names for an operator's tool: like a
// server would, but refusing to make a store where there is none (a
// mistyped --data or schema says so, instead of getting an empty store).
func OpenExisting(ctx context.Context, o Options) (store.Store, func() error, error) {
	clock := o.Clock
	if clock == nil {
		clock = tessera.SystemClock{}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	m := meter.New(clock)
	db, _, err := openStore(ctx, o, m, true)
	if err != nil {
		return nil, nil, err
	}
	if err := m.Attach(ctx, db); err != nil {
		db.Close()
		return nil, nil, err
	}
	// The rows the tool wrote count, as a server's do.
	return db, func() error { return errors.Join(m.Sync(context.Background()), db.Close()) }, nil
}
