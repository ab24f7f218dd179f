// Package jaegertest starts a real trace backend for tests: Jaeger's
// all-in-one program (in-memory storage, OTLP over HTTP in, its query API
// out), one process per test, on loopback ports. scripts/test-setup builds
// it from the Go module proxy at the version in jaeger.version.
package jaegertest

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/testbin"
)

//go:embed jaeger.version
var version string

// Binary is the jaeger binary: $TESSERA_TEST_JAEGER, or where
// scripts/test-setup builds it.
func Binary() string { return testbin.Path("TESSERA_TEST_JAEGER", "jaeger", version) }

// Server is a running Jaeger.
type Server struct {
	// OTLP is the base URL spans are exported to over OTLP/HTTP.
	OTLP string
	// Query is the base URL of its query API.
	Query string
	cmd   *exec.Cmd
	log   *bytes.Buffer
	stop  sync.Once
}

const config = `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
extensions:
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: %s
    grpc:
      endpoint: %s
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
receivers:
  otlp:
    protocols:
      http:
        endpoint: %s
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`

// Start starts a Jaeger for t and stops it when t ends. A missing binary
// fails t, saying how to build it.
func Start(t testing.TB) *Server {
	testbin.Needs(t, "Jaeger")
	t.Helper()
	bin := Binary()
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no Jaeger for the trace tests at %s (%v): `make test` builds it (scripts/test-setup)", bin, err)
	}
	dir := t.TempDir()
	query, grpc, otlp := freeAddr(t), freeAddr(t), freeAddr(t)
	path := filepath.Join(dir, "jaeger.yaml")
	if err := os.WriteFile(path, fmt.Appendf(nil, config, query, grpc, otlp), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &Server{OTLP: "http://" + otlp, Query: "http://" + query, log: &bytes.Buffer{}}
	s.cmd = exec.Command(bin, "--config", path)
	s.cmd.Dir = dir
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.stop.Do(func() {
			_ = s.cmd.Process.Kill()
			_ = s.cmd.Wait()
		})
		if t.Failed() {
			t.Logf("Jaeger log (last 4 KiB):\n%s", testbin.Tail(s.log.Bytes(), 4<<10))
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		res, err := http.Get(s.Query + "/api/services")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				if c, err := net.Dial("tcp", otlp); err == nil {
					c.Close()
					return s
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("Jaeger not ready in 60 s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Span is a span as Jaeger's query API answers it.
type Span struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	StartTime int64 `json:"startTime"`
	Duration  int64 `json:"duration"`
	Tags      []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
	ProcessID string `json:"processID"`
}

// Tag is the value of the span's tag key, as text ("" for none).
func (s Span) Tag(key string) string {
	for _, t := range s.Tags {
		if t.Key == key {
			return fmt.Sprint(t.Value)
		}
	}
	return ""
}

// Trace reads a trace's spans, waiting up to wait for one of each of
// names to have arrived (exporters batch, each node its own).
func (s *Server) Trace(t testing.TB, traceID string, wait time.Duration, names ...string) []Span {
	t.Helper()
	deadline := time.Now().Add(wait)
	var spans []Span
	for {
		res, err := http.Get(s.Query + "/api/traces/" + traceID)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Data []struct {
				Spans []Span `json:"spans"`
			} `json:"data"`
		}
		err = json.NewDecoder(res.Body).Decode(&body)
		res.Body.Close()
		spans = nil
		if err == nil && len(body.Data) > 0 {
			spans = body.Data[0].Spans
		}
		if hasAll(spans, names) || time.Now().After(deadline) {
			return spans
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// hasAll reports whether spans include one of each name: the spans of a
// trace arrive in the batches of each node that made some, in any order.
func hasAll(spans []Span, names []string) bool {
	have := map[string]bool{}
	for _, s := range spans {
		have[s.OperationName] = true
	}
	for _, n := range names {
		if !have[n] {
			return false
		}
	}
	return true
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
