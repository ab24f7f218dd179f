package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/meter"
)

// meterDelta runs fn and returns the storage rows the server's meter counted
// while it ran: the cost of the requests fn sends.
func meterDelta(m *meter.Meter, fn func()) (written, read int64) {
	before := m.Today()
	fn()
	after := m.Today()
	return after.RowsWritten - before.RowsWritten, after.RowsRead - before.RowsRead
}

// §14: the rows each request of the keyed lifecycle costs, as `tessera
// bench rows` reports them. The numbers are logged for comparison between
// releases; the test pins only what must hold: the lifecycle's writes
// write, an empty claim writes nothing (§6: no audit row, only a buffered
// counter), and a counts read writes its audit event and nothing else (§9:
// reads are audited too).
func TestRowsPerRequest(t *testing.T) {
	s := newTestServer(t)
	producer, _ := s.newKey("service", "namespace:main", "enqueue", "read")
	worker, _ := s.newKey("agent", "namespace:main", "claim")
	// Warm up: the first write to a namespace also records the namespace,
	// and each key's first use resolves it; neither is what a steady
	// worker pays per request.
	s.enqueue("main", producer, map[string]any{"title": "warm-up"})
	warm := s.claim("main", worker, "default")
	s.must(200, "POST", "/v1/claims/"+warm.Task.ID+"/submit", worker,
		map[string]any{"lease_token": warm.Lease.Token, "outcome": "succeeded"})
	s.must(200, "GET", "/v1/counts", producer, nil)

	type measured struct {
		name          string
		written, read int64
	}
	var rows []measured
	measure := func(name string, fn func()) measured {
		t.Helper()
		w, r := meterDelta(s.Meter, fn)
		m := measured{name, w, r}
		rows = append(rows, m)
		return m
	}

	var c claimed
	enqueue := measure("enqueue", func() {
		s.enqueue("main", producer, map[string]any{"title": "measured", "payload": map[string]any{"n": 1}})
	})
	claim := measure("granted claim", func() {
		s.must(200, "POST", "/v1/claims", worker, map[string]any{"queue": "default"}).decode(t, &c)
	})
	heartbeat := measure("heartbeat", func() {
		s.must(200, "POST", "/v1/claims/"+c.Task.ID+"/heartbeat", worker, map[string]any{"lease_token": c.Lease.Token})
	})
	submit := measure("submit", func() {
		s.must(200, "POST", "/v1/claims/"+c.Task.ID+"/submit", worker,
			map[string]any{"lease_token": c.Lease.Token, "outcome": "succeeded", "result": map[string]any{"ok": true}})
	})
	empty := measure("empty claim", func() {
		s.must(http.StatusNoContent, "POST", "/v1/claims", worker, map[string]any{"queue": "default"})
	})
	counts := measure("GET /v1/counts", func() {
		s.must(200, "GET", "/v1/counts", producer, nil)
	})
	getTask := measure("GET /v1/tasks/{id}", func() {
		s.must(200, "GET", "/v1/tasks/"+c.Task.ID, producer, nil)
	})

	for _, m := range rows {
		t.Logf("%-18s rows written %3d  rows read %3d", m.name, m.written, m.read)
	}
	for _, m := range []measured{enqueue, claim, heartbeat, submit} {
		if m.written <= 0 {
			t.Errorf("%s counted %d rows written; it writes the task", m.name, m.written)
		}
	}
	if empty.written != 0 {
		t.Errorf("an empty claim counted %d rows written, want 0", empty.written)
	}
	// Two reads of different things each write one audit event: equal
	// costs mean the counts read writes nothing but its event.
	if counts.written != getTask.written {
		t.Errorf("GET /v1/counts wrote %d rows, a task read %d: counts writes more than its audit event",
			counts.written, getTask.written)
	}
	if counts.written >= enqueue.written {
		t.Errorf("GET /v1/counts wrote %d rows, as many as an enqueue (%d)", counts.written, enqueue.written)
	}
	if claim.read <= 0 || counts.read <= 0 {
		t.Errorf("a granted claim read %d rows and counts %d; both read the task", claim.read, counts.read)
	}
}

// With reads counted instead of audited (--audit-reads=counted), a counts
// read and an empty claim write no row at all.
func TestRowsReadsCountedWriteNothing(t *testing.T) {
	s := newTestServer(t, func(c *core.Config) { c.CountReads = true })
	producer, _ := s.newKey("service", "namespace:main", "enqueue", "read")
	worker, _ := s.newKey("agent", "namespace:main", "claim")
	s.enqueue("main", producer, map[string]any{"title": "t"})
	s.must(200, "GET", "/v1/counts", producer, nil)
	s.must(http.StatusNoContent, "POST", "/v1/claims", worker, map[string]any{"queue": "other"})

	counts, countsRead := meterDelta(s.Meter, func() { s.must(200, "GET", "/v1/counts", producer, nil) })
	empty, _ := meterDelta(s.Meter, func() {
		s.must(http.StatusNoContent, "POST", "/v1/claims", worker, map[string]any{"queue": "other"})
	})
	t.Logf("reads counted: GET /v1/counts rows written %d read %d; empty claim rows written %d", counts, countsRead, empty)
	if counts != 0 || empty != 0 {
		t.Errorf("with reads counted: GET /v1/counts wrote %d rows and an empty claim %d, want 0 and 0", counts, empty)
	}
	if countsRead <= 0 {
		t.Errorf("GET /v1/counts read %d rows; it reads the counts", countsRead)
	}
}
