package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/tessera-dev/tessera/internal/bench"
	"github.com/tessera-dev/tessera/internal/store/postgres/pgtest"
)

// runBenchLoad runs the built binary's `bench load` and returns its stdout.
func runBenchLoad(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"bench", "load"}, args...)...)
	cmd.Env = cleanEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("bench load %s: %v\n%s\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.Bytes()
}

// `tessera bench load` starts this very binary as its server on a
// temporary store, runs the lifecycle load, verifies it, reports every
// figure — the server's memory and CPU from /proc — and stops the server.
func TestBenchLoadStartsItsOwnServer(t *testing.T) {
	bin := buildTessera(t)
	profile := filepath.Join(t.TempDir(), "cpu.prof")
	out := runBenchLoad(t, bin, "--workers", "2", "--duration", "2s", "--noop-duration", "1s", "--json", "--cpuprofile", profile)
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(out, &fields); err != nil {
		t.Fatalf("--json printed %s: %v", out, err)
	}
	for _, f := range []string{"mode", "workers", "store", "namespace", "public", "seconds", "tasks", "tasks_per_second", "windows",
		"window_seconds", "calls_per_task", "heartbeat", "noop", "ratio", "latency", "empty_claims", "rows_written_per_task", "rows_read_per_task",
		"rows_from", "store_per_task", "nodes", "bench_cpu_cores", "cpu_profile", "verify"} {
		if v, ok := fields[f]; !ok || string(v) == "null" {
			t.Errorf("the report has no %q", f)
		}
	}
	var rep bench.LoadReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.Verify.Pass || rep.Verify.Enqueued != int(rep.Tasks)+2 || rep.Verify.Succeeded != rep.Verify.Enqueued {
		t.Errorf("verify %+v, %d tasks measured", rep.Verify, rep.Tasks)
	}
	if rep.Store != "sqlite" || rep.Workers != 2 || rep.Tasks == 0 || rep.NoOp.RequestsPerSecond <= 0 || rep.Ratio <= 0 {
		t.Errorf("report %+v", rep)
	}
	if len(rep.Latency) != 4 {
		t.Errorf("latency %+v: want enqueue, claim, heartbeat, submit", rep.Latency)
	}
	n := rep.Nodes[0]
	if len(rep.Nodes) != 1 || n.PID <= 0 || n.From != "proc" || n.IdleRSSBytes == nil || *n.IdleRSSBytes <= 0 ||
		n.EndRSSBytes == nil || *n.EndRSSBytes <= 0 || n.CPUCores == nil || *n.CPUCores <= 0 {
		t.Errorf("nodes %+v: want the child's pid, RSS idle and at the end, CPU, from /proc", rep.Nodes)
	}
	// This build counts its store's commits and their WAL fsyncs, one
	// each, and the time those took. A scrape may fall between a commit
	// and its fsync, so the two may differ by one in each sample.
	c := rep.StorePerTask
	commits, fsyncs := c["tessera_store_commits_total"]*float64(rep.Tasks), c["tessera_store_wal_fsyncs_total"]*float64(rep.Tasks)
	if len(c) != 3 || commits <= 0 || math.Abs(commits-fsyncs) > 2.01 || c["tessera_store_wal_fsync_seconds_total"] <= 0 {
		t.Errorf("store counters per task %v over %d tasks: want commits, as many WAL fsyncs, and their seconds", c, rep.Tasks)
	}
	// And where a write transaction's time went, phase by phase in the
	// store's order; every write waits for its fsync.
	var phases []string
	syncing := 0.0
	for _, p := range rep.WritePhases {
		phases = append(phases, p.Phase)
		if p.Phase == "syncing" {
			syncing = p.MeanMS
		}
	}
	if strings.Join(phases, " ") != "queued running batched committing syncing answering" || syncing <= 0 {
		t.Errorf("write phases %+v: want the six, in order, with time syncing", rep.WritePhases)
	}
	// The child was stopped (and waited for) before the bench exited.
	if err := syscall.Kill(n.PID, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the server (pid %d) still exists after the bench: %v", n.PID, err)
	}
	// The child served its profile on a --debug-addr of its own: a
	// gzipped pprof file.
	if !strings.HasPrefix(rep.CPUProfile, profile+" (") {
		t.Errorf("cpu profile %q: want it written to %s", rep.CPUProfile, profile)
	}
	f, err := os.Open(profile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("cpu profile: %v", err)
	}
	if b, err := io.ReadAll(z); err != nil || len(b) == 0 {
		t.Errorf("cpu profile: %d bytes, %v", len(b), err)
	}
}

// A backlog run works off exactly its backlog and prints every line;
// with --heartbeat=false, the calls it made.
func TestBenchLoadBacklogPrintsEveryFigure(t *testing.T) {
	bin := buildTessera(t)
	for _, c := range []struct {
		flag, what, calls string
		heartbeats        bool
	}{{"--heartbeat=true", "work-off: claim → heartbeat → submit", "× 3 calls", true}, {"--heartbeat=false", "work-off: claim → submit", "× 2 calls", false}} {
		out := string(runBenchLoad(t, bin, "--workers", "2", "--backlog", "50", "--noop-duration", "1s", c.flag))
		for _, line := range []string{"backlog (" + c.what + ")", "\nbacklog ", " 50 tasks enqueued by ", "tasks ", " 50 in ", "tasks/s per window",
			"no-op ", "ratio ", "tasks/s " + c.calls, "rows/task ", "written ", "commits, fsyncs/task ", "write phases ", "server ", "RSS idle ",
			"bench CPU ", "claim ", "submit ", "verify: PASS: 52 enqueued, 52 succeeded, 0 lost"} {
			if !strings.Contains(out, line) {
				t.Errorf("%s: no %q in:\n%s", c.flag, line, out)
			}
		}
		if got := strings.Contains(out, " heartbeat "); got != c.heartbeats {
			t.Errorf("%s: a heartbeat row %v, want %v:\n%s", c.flag, got, c.heartbeats, out)
		}
	}
}

// Several nodes need a store they can share.
func TestBenchLoadRefusesNodesOnSQLite(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"bench", "load", "--nodes", "2"}, &out, &errOut)
	if code := exitCode(err); code != exitUsage || !strings.Contains(err.Error(), "PostgreSQL") {
		t.Errorf("--nodes 2 on sqlite: exit %d, %v", code, err)
	}
}

// With PostgreSQL, --nodes 2 starts two servers on the store and deals
// the workers to them; the verification holds across both.
func TestBenchLoadTwoNodesOnPostgres(t *testing.T) {
	url := pgtest.Schema(t)
	bin := buildTessera(t)
	out := runBenchLoad(t, bin, "--store", url, "--nodes", "2", "--workers", "4", "--duration", "2s", "--noop-duration", "1s", "--json")
	var rep bench.LoadReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("--json printed %s: %v", out, err)
	}
	if !rep.Verify.Pass || rep.Verify.Enqueued != int(rep.Tasks)+4 || rep.Tasks == 0 {
		t.Errorf("verify %+v, %d tasks measured", rep.Verify, rep.Tasks)
	}
	if len(rep.Nodes) != 2 || rep.Nodes[0].URL == rep.Nodes[1].URL {
		t.Fatalf("nodes %+v, want two", rep.Nodes)
	}
	for _, n := range rep.Nodes {
		if n.Workers != 2 || n.PID <= 0 || n.From != "proc" || n.EndRSSBytes == nil || n.CPUCores == nil || *n.CPUCores <= 0 {
			t.Errorf("node %+v: want 2 workers, and its RSS and CPU from /proc", n)
		}
	}
	// Both nodes' meters are summed: rows per task are there.
	if rep.RowsWrittenPerTask == nil || *rep.RowsWrittenPerTask <= 0 || rep.RowsFrom != "metrics" {
		t.Errorf("rows per task %v from %q", rep.RowsWrittenPerTask, rep.RowsFrom)
	}
}
