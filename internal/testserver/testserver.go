// Package testserver starts a real Tessera server for the tests of
// packages that speak to it from outside — the Go client, the worker
// runner, the CLI: the same wiring as `tessera serve` (internal/app), on a
// SQLite file in a temporary directory, behind httptest, with a manual
// clock for lease and backoff time.
package testserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/app"
	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/httpapi"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// AdminKey is the admin key every test server is seeded with.
const AdminKey = "tsk_clienttest_abcdefghijklmnopqrstuvwxyz0123"

// Server is a started test server.
type Server struct {
	URL   string
	Clock *tessera.ManualClock
	App   *app.App
	Dir   string
}

// Options configure a test server.
type Options struct {
	// Wrap, when set, wraps the API handler (to inject faults in front of
	// the real server).
	Wrap func(http.Handler) http.Handler
	// Core adjusts the core configuration.
	Core func(*core.Config)
	// MetricsPublic serves /metrics without a key.
	MetricsPublic bool
}

// Start starts a server that stops when the test ends.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	s, stop, err := Open(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return s
}

// Open starts a server on the data directory dir and returns it with the
// func that stops it, for a TestMain (which has no testing.TB).
func Open(dir string, o Options) (*Server, func(), error) {
	cfg := core.DefaultConfig()
	if o.Core != nil {
		o.Core(&cfg)
	}
	clock := tessera.NewManualClock(time.Now())
	a, err := app.Open(context.Background(), app.Options{DataDir: dir, Clock: clock, Core: cfg, AdminKey: AdminKey,
		HTTP: httpapi.Config{PublicURL: "http://127.0.0.1:8787", Version: "test", MetricsPublic: o.MetricsPublic}})
	if err != nil {
		return nil, nil, err
	}
	var h http.Handler = a.API
	if o.Wrap != nil {
		h = o.Wrap(h)
	}
	hs := httptest.NewServer(h)
	stop := func() {
		a.Core.Close()
		hs.CloseClientConnections()
		hs.Close()
		a.Close()
	}
	return &Server{URL: hs.URL, Clock: clock, App: a, Dir: dir}, stop, nil
}
