package httpapi

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// requestMetrics counts requests by route and status for GET /metrics.
// Routes are the table's patterns, so the label set is bounded.
type requestMetrics struct {
	mu       sync.Mutex
	requests map[[2]string]int64 // route, status → count
	seconds  map[string]float64  // route → total seconds
}

func newRequestMetrics() *requestMetrics {
	return &requestMetrics{requests: map[[2]string]int64{}, seconds: map[string]float64{}}
}

func (m *requestMetrics) observe(route string, status int, d time.Duration) {
	if route == "" {
		route = "unmatched"
	}
	m.mu.Lock()
	m.requests[[2]string{route, fmt.Sprint(status)}]++
	m.seconds[route] += d.Seconds()
	m.mu.Unlock()
}

// metrics serves the Prometheus text format (SPEC §14, §15): storage rows
// metered today and since start, the allowance, and requests by route and
// status. It needs an admin key unless the server was told otherwise.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	if rec, ok := w.(*statusRecorder); ok {
		rec.route = "GET /metrics"
	}
	// A scrape every few seconds is counted, not evented: it reads no
	// tenant's data and would otherwise fill the audit trail.
	principal := ""
	if !s.cfg.MetricsPublic {
		c := &call{w: w, r: r, ns: tessera.MainNamespace, ctx: r.Context()}
		err := s.edge(c, route{op: core.ActMetrics})
		if c.actor != nil {
			principal = c.actor.Principal.ID
		}
		if err != nil {
			writeError(w, s.log, err)
			s.core.Count(principal, tessera.MainNamespace, core.ActMetrics, string(tessera.ErrorCode(err)))
			return
		}
	}
	s.core.Count(principal, tessera.MainNamespace, core.ActMetrics, "ok")
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	s.writeMetrics(w)
}

func (s *Server) writeMetrics(w io.Writer) {
	today := s.core.Meter().Today()
	written, read := s.core.Meter().Lifetime()
	metric := func(name, kind, help string, samples ...string) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, kind)
		for _, smp := range samples {
			fmt.Fprintf(w, "%s%s\n", name, smp)
		}
	}
	metric("tessera_storage_rows_written_total", "counter", "Storage rows written since start (each row changed plus one per index).", fmt.Sprintf(" %d", written))
	metric("tessera_storage_rows_read_total", "counter", "Storage rows read since start (rows returned plus full-scan steps).", fmt.Sprintf(" %d", read))
	metric("tessera_storage_rows_written_today", "gauge", "Storage rows written this UTC day.", fmt.Sprintf(" %d", today.RowsWritten))
	metric("tessera_storage_rows_read_today", "gauge", "Storage rows read this UTC day.", fmt.Sprintf(" %d", today.RowsRead))
	metric("tessera_storage_allowance_rows", "gauge", "Daily storage allowance (0 = unlimited).",
		fmt.Sprintf(`{kind="written"} %d`, today.Allowance.RowsWrittenPerDay), fmt.Sprintf(`{kind="read"} %d`, today.Allowance.RowsReadPerDay))

	s.reqs.mu.Lock()
	var counts, durations []string
	for k, n := range s.reqs.requests {
		counts = append(counts, fmt.Sprintf(`{route=%q,status=%q} %d`, k[0], k[1], n))
	}
	for route, sec := range s.reqs.seconds {
		durations = append(durations, fmt.Sprintf(`{route=%q} %g`, route, sec))
	}
	s.reqs.mu.Unlock()
	sort.Strings(counts)
	sort.Strings(durations)
	metric("tessera_http_requests_total", "counter", "HTTP requests by route and status.", counts...)
	metric("tessera_http_request_seconds_total", "counter", "Time spent serving HTTP requests, by route.", durations...)
}
