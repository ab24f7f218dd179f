package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/tessera-dev/tessera/internal/app"
	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/httpapi"
	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/telemetry"
)

func serve(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlagSet("serve")
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8787", "listen address")
	data := fs.String("data", "./tessera-data", "data directory (SQLite file, blobs)")
	storeKind := fs.String("store", "sqlite", "storage backend: sqlite (a file in --data), or a postgres:// URL several nodes share")
	blobsKind := fs.String("blobs", "", "where blob bytes live: local (--data/blobs), postgres (the --store database, where every node reads them) or an s3://bucket/prefix?endpoint=http(s)://host URL (an S3-compatible object store every node reads; credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY) (default: postgres with a postgres:// --store, else local)")
	publicURL := fs.String("public-url", "", "base URL clients reach this server at (default http://<addr>, 127.0.0.1 for an unspecified host)")
	metricsPublic := fs.Bool("metrics-public", false, "serve GET /metrics without a key")
	logFormat := fs.String("log-format", "text", "log format: text or json")
	drain := fs.Duration("drain-timeout", 30*time.Second, "how long SIGTERM waits for in-flight requests")
	debugAddr := fs.String("debug-addr", "", "serve Go's profiles (/debug/pprof/) on this address of their own (default: off)")
	otlpEndpoint := fs.String("otlp-endpoint", "", "export traces over OTLP/HTTP to this base URL, e.g. http://collector:4318 (default: OTEL_EXPORTER_OTLP_ENDPOINT, else off)")
	httpCfg := httpapi.Config{Version: version}
	fs.DurationVar(&httpCfg.BodyReadTimeout, "body-read-timeout", httpapi.DefaultBodyReadTimeout, "a request body must be in within this, plus one second per --min-upload-rate bytes")
	fs.Int64Var(&httpCfg.MinUploadRate, "min-upload-rate", httpapi.DefaultMinUploadRate, "the slowest a request body may arrive after --body-read-timeout, in bytes per second")
	fs.IntVar(&httpCfg.MaxConns, "max-connections", 0, "open connections served at once; beyond, 503 (0 = sized to the open-file limit)")
	fs.IntVar(&httpCfg.ConnsPerAddress, "max-connections-per-address", httpapi.DefaultConnsPerAddress, "open connections from one client address (IPv6 by /64) not yet used with a key; beyond, 429 (0 = no limit; --trust-proxy peers exempt)")
	fs.Float64Var(&httpCfg.KeylessRate, "keyless-rate", httpapi.DefaultKeylessRate, "requests a second without a key from one client address (IPv6 by /64, the forwarded one behind --trust-proxy); beyond, 429 (0 = no limit)")
	fs.IntVar(&httpCfg.KeylessBurst, "keyless-burst", httpapi.DefaultKeylessBurst, "requests without a key one client address may make at once above --keyless-rate")
	cfg := core.DefaultConfig()
	fs.Float64Var(&cfg.ClaimRate, "claim-rate", cfg.ClaimRate, "claims per second admitted per key; over it a claim waits --claim-admission-wait, then gets 429")
	fs.IntVar(&cfg.ClaimBurst, "claim-burst", cfg.ClaimBurst, "claims per key admitted at once above --claim-rate (a pool starting together)")
	fs.IntVar(&cfg.ClaimConcurrency, "claim-concurrency", cfg.ClaimConcurrency, "claims in flight per key, long-polls included: at least the workers that share a key")
	fs.DurationVar(&cfg.AdmissionWait, "claim-admission-wait", cfg.AdmissionWait, "how long a claim over its bound waits before 429")
	fs.Int64Var(&cfg.MaxBlobBytes, "max-blob-bytes", cfg.MaxBlobBytes, "largest blob upload, in bytes")
	fs.DurationVar(&cfg.RetainFinished, "retain-finished", cfg.RetainFinished, "how long succeeded, dead and canceled tasks are kept (0 = forever)")
	fs.IntVar(&cfg.Sessions.PerAddress, "session-address-limit", cfg.Sessions.PerAddress, "anonymous sessions an hour per client address (IPv6 by /64)")
	fs.IntVar(&cfg.Sessions.PerHour, "session-allowance", cfg.Sessions.PerHour, "anonymous sessions an hour for everyone, accruing evenly (a tenth at once)")
	fs.IntVar(&cfg.Sessions.Requests, "session-requests", cfg.Sessions.Requests, "requests each anonymous session may make")
	fs.IntVar(&cfg.StreamsPerKey, "streams-per-key", cfg.StreamsPerKey, "live event streams (GET /v1/events) one key holds open; beyond, 429")
	fs.IntVar(&cfg.MaxStreams, "max-streams", cfg.MaxStreams, "live event streams this node holds open; beyond, 429")
	trustProxy := fs.String("trust-proxy", "", "comma-separated CIDRs of reverse proxies whose X-Forwarded-For is believed (default: none)")
	var allowance meter.Allowance
	fs.Int64Var(&allowance.RowsWrittenPerDay, "storage-rows-written-per-day", 0, "daily allowance of rows written (0 = unlimited)")
	fs.Int64Var(&allowance.RowsReadPerDay, "storage-rows-read-per-day", 0, "daily allowance of rows read (0 = unlimited)")
	auditReads := fs.String("audit-reads", "events", "events: an audit event per keyed read; counted: count reads instead, so they work while writes are refused")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if k := *storeKind; k != "sqlite" && !strings.HasPrefix(k, "postgres://") && !strings.HasPrefix(k, "postgresql://") {
		return fmt.Errorf("--store %q: want sqlite or a postgres:// URL", k)
	}
	if cfg.ClaimRate <= 0 || cfg.ClaimBurst < 1 || cfg.ClaimConcurrency < 1 {
		return errors.New("claim rate, burst and concurrency must be positive")
	}
	switch *auditReads {
	case "events":
	case "counted":
		cfg.CountReads = true
	default:
		return fmt.Errorf("--audit-reads %q: want events or counted", *auditReads)
	}
	if allowance.RowsWrittenPerDay < 0 || allowance.RowsReadPerDay < 0 {
		return errors.New("storage allowances must be ≥ 0")
	}
	if cfg.MaxBlobBytes < 1 {
		return errors.New("--max-blob-bytes must be positive")
	}
	if cfg.StreamsPerKey < 1 || cfg.MaxStreams < 1 {
		return errors.New("--streams-per-key and --max-streams must be positive")
	}
	if cfg.Sessions.PerAddress < 0 || cfg.Sessions.PerHour < 0 || cfg.Sessions.Requests < 0 || cfg.RetainFinished < 0 {
		return errors.New("session limits and --retain-finished must be ≥ 0")
	}
	if httpCfg.BodyReadTimeout <= 0 || httpCfg.MinUploadRate < 1 || httpCfg.MaxConns < 0 {
		return errors.New("--body-read-timeout and --min-upload-rate must be positive, --max-connections ≥ 0")
	}
	if httpCfg.ConnsPerAddress < 0 || httpCfg.KeylessRate < 0 || httpCfg.KeylessBurst < 1 {
		return errors.New("--max-connections-per-address and --keyless-rate must be ≥ 0, --keyless-burst ≥ 1")
	}
	if httpCfg.MaxConns == 0 {
		httpCfg.MaxConns = httpapi.DefaultMaxConns()
	}
	proxies, err := parsePrefixes(*trustProxy)
	if err != nil {
		return fmt.Errorf("--trust-proxy: %w", err)
	}
	log := newLogger(*logFormat, stderr)

	// Listen before the store is opened: a port in use is refused before
	// a new store is made, and before its first admin key is shown "only
	// this once" by a server that never served.
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("--addr %s is in use (another tessera serve?): stop it, or choose another address", *addr)
		}
		return fmt.Errorf("--addr: %w", err)
	}
	defer ln.Close()
	if *publicURL == "" {
		*publicURL = "http://" + reachable(ln.Addr())
	}
	httpCfg.PublicURL, httpCfg.MetricsPublic, httpCfg.TrustProxy = *publicURL, *metricsPublic, proxies
	stopTraces, tracing, err := telemetry.Setup(ctx, *otlpEndpoint, version)
	if err != nil {
		return err
	}
	defer func() {
		// What the exporter holds goes out before the process ends.
		flush, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := stopTraces(flush); err != nil {
			log.Warn("traces not all exported", "err", err)
		}
	}()
	a, err := app.Open(ctx, app.Options{DataDir: *data, Store: *storeKind, Blobs: *blobsKind, Core: cfg, Allowance: allowance, Log: log,
		AdminKey: os.Getenv("TESSERA_ADMIN_KEY"), HTTP: httpCfg})
	if err != nil {
		return err
	}
	defer a.Close()
	if a.Refused != nil {
		log.Warn("storage refused at start-up; serving discovery, and this error for the rest until restarted", "err", a.Refused)
	}
	svc := a.Core
	srv := a.API.HTTPServer()
	dataDir, err := filepath.Abs(*data)
	if err != nil {
		return err
	}
	log.Info("tessera serving", "url", *publicURL, "board", *publicURL+"/board", "console", *publicURL+"/console", "store", a.Where, "blobs", a.BlobsWhere, "data", dataDir,
		"version", version, "addr", ln.Addr().String(), "tracing", tracing, "max_connections", httpCfg.MaxConns,
		"max_connections_per_address", httpCfg.ConnsPerAddress, "keyless_rate", httpCfg.KeylessRate, "keyless_burst", httpCfg.KeylessBurst)
	if a.CreatedKey != "" {
		fmt.Fprintf(stderr, "\ntessera: a new store; its first admin key is shown only this once. To use it:\n\n  export TESSERA_URL=%s\n  export TESSERA_KEY=%s\n\n", *publicURL, a.CreatedKey)
	}
	if *debugAddr != "" {
		stop, err := serveDebug(*debugAddr, log)
		if err != nil {
			return fmt.Errorf("--debug-addr: %w", err)
		}
		defer stop()
	}

	// Start-up's garbage (the migrations, the discovery documents and
	// tool schemas built once) would stay resident until the heap grew
	// back into it; handed back now, an idle server holds 2 MiB less.
	debug.FreeOSMemory()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(a.API.Listener(ln)) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Stop accepting, cut off bodies that stall, end long-polls, let
	// in-flight requests finish, then write what they counted.
	log.Info("tessera draining")
	a.API.Drain()
	svc.Close()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), *drain)
	defer cancel()
	err = srv.Shutdown(shutdownCtx)
	if ferr := svc.FlushCounters(context.Background(), true); ferr != nil {
		log.Warn("counters lost: the final flush failed", "err", ferr)
	}
	if err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	log.Info("tessera stopped")
	return nil
}

// reachable is the listener's address as a local client dials it: an
// unspecified host (0.0.0.0, ::) as the loopback address.
func reachable(addr net.Addr) string {
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil || !ap.Addr().IsUnspecified() {
		return addr.String()
	}
	return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), ap.Port()).String()
}

// parsePrefixes reads a comma-separated list of CIDRs (a bare address is
// its own /32 or /128).
func parsePrefixes(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(list, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			a, aerr := netip.ParseAddr(f)
			if aerr != nil {
				return nil, err
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

func newLogger(format string, w io.Writer) *slog.Logger {
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, nil))
	}
	return slog.New(slog.NewTextHandler(w, nil))
}
