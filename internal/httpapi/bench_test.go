package httpapi_test

import (
	"fmt"
	"testing"

	"github.com/tessera-dev/tessera/internal/core"
)

// unthrottled lifts claim admission (§6) so a benchmark measures the work of
// a claim, not the per-key rate limit.
func unthrottled(c *core.Config) {
	c.ClaimRate, c.ClaimBurst, c.ClaimConcurrency = 1e9, 1<<30, 1<<10
}

// reportRows reports the storage rows per operation counted since before.
func reportRows(b *testing.B, s *testServer, fn func()) {
	b.Helper()
	w, r := meterDelta(s.Meter, fn)
	b.ReportMetric(float64(w)/float64(b.N), "rows_written/op")
	b.ReportMetric(float64(r)/float64(b.N), "rows_read/op")
}

// BenchmarkClaimSubmit times a worker's claim → submit over real HTTP on a
// real SQLite file, with b.N tasks enqueued beforehand.
func BenchmarkClaimSubmit(b *testing.B) {
	s := newTestServer(b, unthrottled)
	producer, _ := s.newKey("service", "namespace:main", "enqueue")
	worker, _ := s.newKey("agent", "namespace:main", "claim")
	for i := range b.N {
		s.enqueue("main", producer, map[string]any{"title": fmt.Sprintf("bench %d", i)})
	}
	// One warm-up cycle resolves the worker's key before timing.
	s.enqueue("main", producer, map[string]any{"title": "warm-up", "priority": 1})
	c := s.claim("main", worker, "default")
	s.must(200, "POST", "/v1/claims/"+c.Task.ID+"/submit", worker, map[string]any{"lease_token": c.Lease.Token, "outcome": "succeeded"})

	b.ReportAllocs()
	b.ResetTimer()
	reportRows(b, s, func() {
		for range b.N {
			c := s.claim("main", worker, "default")
			s.must(200, "POST", "/v1/claims/"+c.Task.ID+"/submit", worker,
				map[string]any{"lease_token": c.Lease.Token, "outcome": "succeeded", "result": map[string]any{"ok": true}})
		}
	})
	b.StopTimer()
	s.must(204, "POST", "/v1/claims", worker, map[string]any{"queue": "default"})
}

// BenchmarkEnqueue times POST /v1/tasks over real HTTP on a real SQLite file.
func BenchmarkEnqueue(b *testing.B) {
	s := newTestServer(b)
	producer, _ := s.newKey("service", "namespace:main", "enqueue")
	s.enqueue("main", producer, map[string]any{"title": "warm-up"})

	b.ReportAllocs()
	b.ResetTimer()
	reportRows(b, s, func() {
		for i := range b.N {
			s.enqueue("main", producer, map[string]any{"title": fmt.Sprintf("bench %d", i), "payload": map[string]any{"i": i}})
		}
	})
}

// BenchmarkEnqueueBatch times tasks enqueued 100 at a time through POST
// /v1/tasks/batch. An op is one task, so its figures read beside
// BenchmarkEnqueue's.
func BenchmarkEnqueueBatch(b *testing.B) {
	s := newTestServer(b)
	producer, _ := s.newKey("service", "namespace:main", "enqueue")
	s.enqueueBatch("main", producer, batchOf("warm-up", 2))

	b.ReportAllocs()
	b.ResetTimer()
	reportRows(b, s, func() {
		for done := 0; done < b.N; done += 100 {
			s.enqueueBatch("main", producer, batchOf("bench", min(100, b.N-done)))
		}
	})
}
