package bench

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/tessera-dev/tessera/client"
	"github.com/tessera-dev/tessera/internal/store"
)

// nodeSample is what one look at a server said: its metered storage rows,
// the store's commit and fsync counters if it exposes any, and its memory
// and CPU time.
type nodeSample struct {
	rowsWritten, rowsRead float64
	// rowsFrom is where the rows came from: "metrics" (the lifetime
	// counters), "admin storage" (today's totals), or "" (nowhere).
	rowsFrom string
	// storeCounters are the tessera_* counter families whose name says
	// commit or fsync, summed over their labels.
	storeCounters map[string]float64
	// writes and writeSeconds (by phase) are the store's write
	// transactions and where their time went, if it says.
	writes       float64
	writeSeconds map[string]float64
	rssBytes     int64
	cpu          time.Duration
	// procFrom is "proc" (/proc of a known pid), "metrics" (the process
	// collector's figures) or "" (neither).
	procFrom string
}

// sampleNode scrapes n's /metrics with the admin key, falls back to
// GET /v1/admin/storage for the rows, and prefers /proc for memory and
// CPU when the pid is known.
func sampleNode(ctx context.Context, admin *client.Client, n *node) nodeSample {
	s := nodeSample{storeCounters: map[string]float64{}}
	if text, err := admin.Document(ctx, "/metrics"); err == nil {
		if fams, err := parseMetrics(text); err == nil {
			s.fromMetrics(fams)
		}
	}
	if s.rowsFrom == "" {
		if t, err := admin.Storage(ctx); err == nil {
			s.rowsWritten, s.rowsRead, s.rowsFrom = float64(t.RowsWritten), float64(t.RowsRead), "admin storage"
		}
	}
	if n.pid > 0 {
		if rss, cpu, ok := procStatus(n.pid); ok {
			s.rssBytes, s.cpu, s.procFrom = rss, cpu, "proc"
		}
	}
	return s
}

func parseMetrics(text []byte) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("parse /metrics: %w", err)
	}
	return fams, nil
}

func (s *nodeSample) fromMetrics(fams map[string]*dto.MetricFamily) {
	if w, ok := familySum(fams["tessera_storage_rows_written_total"]); ok {
		r, _ := familySum(fams["tessera_storage_rows_read_total"])
		s.rowsWritten, s.rowsRead, s.rowsFrom = w, r, "metrics"
	}
	for name, f := range fams {
		if !strings.HasPrefix(name, "tessera_") || !(strings.Contains(name, "commit") || strings.Contains(name, "fsync")) {
			continue
		}
		if f.GetType() != dto.MetricType_COUNTER && f.GetType() != dto.MetricType_UNTYPED {
			continue
		}
		if v, ok := familySum(f); ok {
			s.storeCounters[name] = v
		}
	}
	if n, ok := familySum(fams["tessera_store_write_transactions_total"]); ok {
		s.writes, s.writeSeconds = n, map[string]float64{}
		for _, m := range fams["tessera_store_write_transaction_seconds_total"].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "phase" {
					s.writeSeconds[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	rss, okRSS := familySum(fams["process_resident_memory_bytes"])
	cpu, okCPU := familySum(fams["process_cpu_seconds_total"])
	if okRSS && okCPU {
		s.rssBytes, s.cpu, s.procFrom = int64(rss), time.Duration(cpu*float64(time.Second)), "metrics"
	}
}

// familySum adds a counter, gauge or untyped family's samples over their
// labels.
func familySum(f *dto.MetricFamily) (float64, bool) {
	if f == nil || len(f.GetMetric()) == 0 {
		return 0, false
	}
	var sum float64
	for _, m := range f.GetMetric() {
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Untyped != nil:
			sum += m.GetUntyped().GetValue()
		default:
			return 0, false
		}
	}
	return sum, true
}

// sampleAll samples every node at once (so a multi-node delta covers the
// same moment on each).
func sampleAll(ctx context.Context, admins []*client.Client, nodes []*node) []nodeSample {
	out := make([]nodeSample, len(nodes))
	done := make(chan struct{})
	for i := range nodes {
		go func() {
			out[i] = sampleNode(ctx, admins[i], nodes[i])
			done <- struct{}{}
		}()
	}
	for range nodes {
		<-done
	}
	return out
}

// storageDelta is what the nodes metered between two samples, per task
// done; nil fields were not available on every node.
type storageDelta struct {
	RowsWritten, RowsRead *float64
	From                  string
	// StoreCounters are per task, by metric name; empty when no node
	// exposes a commit or fsync counter.
	StoreCounters map[string]float64
	// WritePhases is the mean time of a write transaction in each phase
	// the store reports, in the store's order; nil when a node reports
	// none.
	WritePhases []WritePhase
}

func deltaPerTask(before, after []nodeSample, tasks int64) storageDelta {
	d := storageDelta{StoreCounters: map[string]float64{}}
	if tasks <= 0 {
		return d
	}
	var w, r float64
	from := after[0].rowsFrom
	for i := range after {
		// Totals from different sources (or none) cannot be subtracted.
		if after[i].rowsFrom == "" || after[i].rowsFrom != before[i].rowsFrom || after[i].rowsFrom != from {
			from = ""
			break
		}
		w += after[i].rowsWritten - before[i].rowsWritten
		r += after[i].rowsRead - before[i].rowsRead
	}
	// Today's totals may be the store's rather than the node's: only one
	// node's can be read without counting rows twice.
	if from == "admin storage" && len(after) > 1 {
		from = ""
	}
	if from != "" {
		w, r = w/float64(tasks), r/float64(tasks)
		d.RowsWritten, d.RowsRead, d.From = &w, &r, from
	}
	names := map[string]bool{}
	for _, s := range after {
		for name := range s.storeCounters {
			names[name] = true
		}
	}
	for name := range names {
		var sum float64
		for i := range after {
			sum += after[i].storeCounters[name] - before[i].storeCounters[name]
		}
		d.StoreCounters[name] = sum / float64(tasks)
	}
	d.WritePhases = writePhases(before, after)
	return d
}

// writePhases is the mean time per write transaction of each phase
// between two samples of every node.
func writePhases(before, after []nodeSample) []WritePhase {
	var writes float64
	seconds := map[string]float64{}
	for i := range after {
		if after[i].writeSeconds == nil || before[i].writeSeconds == nil {
			return nil
		}
		writes += after[i].writes - before[i].writes
		for phase, v := range after[i].writeSeconds {
			seconds[phase] += v - before[i].writeSeconds[phase]
		}
	}
	if writes <= 0 {
		return nil
	}
	var out []WritePhase
	for _, phase := range store.WritePhases {
		if v, ok := seconds[phase]; ok {
			out = append(out, WritePhase{Phase: phase, MeanMS: v / writes * 1e3})
			delete(seconds, phase)
		}
	}
	// A server of another version may name phases this one does not.
	for _, phase := range sortedKeys(seconds) {
		out = append(out, WritePhase{Phase: phase, MeanMS: seconds[phase] / writes * 1e3})
	}
	return out
}

// sortedKeys returns a map's keys in order, for stable output.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
