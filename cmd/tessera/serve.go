package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/httpapi"
	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/store/sqlite"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// keyCacheTTL is how long a key resolution is trusted (SPEC §4: ≤ 5 s).
const keyCacheTTL = 5 * time.Second

func serve(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8787", "listen address")
	data := fs.String("data", "./tessera-data", "data directory (SQLite file, blobs)")
	storeKind := fs.String("store", "sqlite", "storage backend: sqlite")
	logFormat := fs.String("log-format", "text", "log format: text or json")
	drain := fs.Duration("drain-timeout", 30*time.Second, "how long SIGTERM waits for in-flight requests")
	cfg := core.DefaultConfig()
	fs.Float64Var(&cfg.ClaimRate, "claim-rate", cfg.ClaimRate, "claims per second admitted per key")
	fs.IntVar(&cfg.ClaimBurst, "claim-burst", cfg.ClaimBurst, "claim burst per key")
	fs.IntVar(&cfg.ClaimConcurrency, "claim-concurrency", cfg.ClaimConcurrency, "claims in flight per key")
	fs.DurationVar(&cfg.AdmissionWait, "claim-admission-wait", cfg.AdmissionWait, "how long a claim over its bound waits before 429")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *storeKind != "sqlite" {
		return fmt.Errorf("--store %q: only sqlite is available in this build", *storeKind)
	}
	if cfg.ClaimRate <= 0 || cfg.ClaimBurst < 1 || cfg.ClaimConcurrency < 1 {
		return errors.New("claim rate, burst and concurrency must be positive")
	}
	log := newLogger(*logFormat, stderr)

	if err := os.MkdirAll(*data, 0o700); err != nil {
		return err
	}
	clock := tessera.SystemClock{}
	m := meter.New(clock)
	db, err := sqlite.Open(ctx, filepath.Join(*data, "tessera.db"), m)
	if err != nil {
		return err
	}
	defer db.Close()

	created, err := core.Bootstrap(ctx, db, clock, os.Getenv("TESSERA_ADMIN_KEY"))
	if err != nil {
		return err
	}
	if created != "" {
		fmt.Fprintf(stderr, "tessera: created the first admin key; it is shown only this once:\n\n  %s\n\n", created)
	}

	svc := core.New(db, auth.NewAuthenticator(db, clock, keyCacheTTL), m, clock, cfg)
	srv := &http.Server{
		Handler:           httpapi.New(svc, log),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	log.Info("tessera serving", "addr", ln.Addr().String(), "data", *data, "version", version)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Stop accepting, end long-polls, let in-flight requests finish.
	log.Info("tessera draining")
	svc.Close()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), *drain)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	log.Info("tessera stopped")
	return nil
}

func newLogger(format string, w io.Writer) *slog.Logger {
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, nil))
	}
	return slog.New(slog.NewTextHandler(w, nil))
}
