package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/tessera-dev/tessera/client"
)

// LoadOptions configure `tessera bench load`.
type LoadOptions struct {
	// Binary is the tessera binary started as `serve` (the command passes
	// its own executable). Unused with URL.
	Binary string
	// URL and Key name a running server and an admin key of it, instead
	// of starting one; PID, when given, is that server's process, read
	// for memory and CPU time.
	URL, Key string
	PID      int
	// DebugURL, with URL, is where that server serves its profiles (its
	// --debug-addr); started servers get one of their own.
	DebugURL string
	// Store is the started servers' --store (sqlite, or a PostgreSQL URL
	// that Nodes servers share).
	Store string
	Nodes int
	// Workers each have a key of their own and their own connection.
	Workers int
	// Duration is how long the lifecycle load runs. With Backlog it caps
	// the work-off (0: until the backlog is worked off).
	Duration time.Duration
	// Backlog, when set, enqueues that many tasks first and measures
	// working them off (claim → heartbeat → submit).
	Backlog int
	// NoHeartbeat leaves the heartbeat out: a worker claims and submits,
	// as a job queue's worker fetches and completes a job too short to
	// need its lease extended.
	NoHeartbeat bool
	// Batch, with Backlog, works the backlog off Batch tasks a time: a
	// batch claim (POST /v1/claims/batch, max Batch) and one batch submit
	// of what it granted (POST /v1/claims/submit). 0 or 1: one at a time.
	Batch  int
	Public bool
	// CPUProfile is a file to write a CPU profile of the (first) server
	// to, taken over the middle of the run from its --debug-addr.
	CPUProfile string
	// NoOpDuration is how long the no-op baseline runs in all, half
	// before and half after the load (default Duration, or 10 s when
	// that is 0).
	NoOpDuration time.Duration
	// Window is the length of the per-window rates (default 5 s).
	Window time.Duration
	// Progress receives a line per step (nil: none).
	Progress io.Writer
}

// LoadReport is everything a run measured.
type LoadReport struct {
	Mode      string  `json:"mode"` // lifecycle or backlog
	Workers   int     `json:"workers"`
	Store     string  `json:"store"`
	Namespace string  `json:"namespace"`
	Public    bool    `json:"public"`
	Seconds   float64 `json:"seconds"`
	// Tasks were taken through their lifecycle (or worked off) in the
	// measured phase; warm-up and drain are left out.
	Tasks          int64    `json:"tasks"`
	TasksPerSecond float64  `json:"tasks_per_second"`
	Windows        []Window `json:"windows"`
	WindowSeconds  float64  `json:"window_seconds"`
	// CallsPerTask are a task's requests; with Batch, 1: a task's share
	// of its batch's (2 ÷ Batch, plus a heartbeat each) counted as one.
	CallsPerTask int       `json:"calls_per_task"`
	Batch        int       `json:"batch,omitempty"`
	Heartbeat    bool      `json:"heartbeat"`
	NoOp         NoOp      `json:"noop"`
	Ratio        float64   `json:"ratio"`
	Latency      []Latency `json:"latency"`
	EmptyClaims  int64     `json:"empty_claims"`
	// RowsWrittenPerTask and RowsReadPerTask are the meter's delta over
	// the measured phase ÷ Tasks; RowsFrom says where it was read.
	RowsWrittenPerTask *float64 `json:"rows_written_per_task"`
	RowsReadPerTask    *float64 `json:"rows_read_per_task"`
	RowsFrom           string   `json:"rows_from"`
	// StorePerTask are the server's commit/fsync counters per task, by
	// metric name; empty when it exposes none ("n/a").
	StorePerTask map[string]float64 `json:"store_per_task"`
	// WritePhases says where a write transaction's time went, when the
	// store reports it (SQLite's group commit).
	WritePhases []WritePhase `json:"write_phases,omitempty"`
	Nodes       []NodeReport `json:"nodes"`
	// BenchCPUCores is the load generator's own CPU use (÷ Seconds), to
	// see whether it, rather than the server, was the limit.
	BenchCPUCores *float64 `json:"bench_cpu_cores"`
	// CPU is what a call cost the machine's processors, when every
	// figure it needs was read.
	CPU        *CPUPerCall    `json:"cpu_per_call,omitempty"`
	Backlog    *BacklogReport `json:"backlog,omitempty"`
	CPUProfile string         `json:"cpu_profile"`
	Verify     *VerifyReport  `json:"verify"`
}

// WritePhase is the mean time a write transaction spent in one phase.
type WritePhase struct {
	Phase  string  `json:"phase"`
	MeanMS float64 `json:"mean_ms"`
}

// Window is the rate over one window of the measured phase.
type Window struct {
	StartSeconds   float64 `json:"start_seconds"`
	Seconds        float64 `json:"seconds"`
	Tasks          int64   `json:"tasks"`
	TasksPerSecond float64 `json:"tasks_per_second"`
}

// NoOp is the baseline: the same client, workers and request size
// against a Go handler that does nothing, half just before the load and
// half just after.
type NoOp struct {
	Requests          int64   `json:"requests"`
	Seconds           float64 `json:"seconds"`
	RequestsPerSecond float64 `json:"requests_per_second"`
	// Before and after are the two halves' rates: far apart, the machine
	// was busier during one of them than the other.
	BeforeRequestsPerSecond float64 `json:"before_requests_per_second"`
	AfterRequestsPerSecond  float64 `json:"after_requests_per_second"`
	Errors                  int64   `json:"errors"`
	// CPUMicrosPerRequest is this process's CPU over the baseline ÷
	// its requests: the client's and the no-op handler's work together,
	// since both run here.
	CPUMicrosPerRequest *float64 `json:"cpu_us_per_request,omitempty"`
	cpu                 time.Duration
	cpuOK               bool
}

// CPUPerCall is the measured phase's CPU ÷ its calls (tasks × calls per
// task), in µs: the servers' and this load generator's. When both ran
// on this machine, CeilingTasksPerSecond is the rate at which that work
// would take all of its Cores: the most a run could reach at this cost
// per call however the calls were scheduled. Well under it, the run
// waited on something other than processors (fsyncs, a serial writer,
// wake-ups); near it, only cheaper calls can go faster.
type CPUPerCall struct {
	ServerMicros          float64  `json:"server_us"`
	BenchMicros           float64  `json:"bench_us"`
	Cores                 int      `json:"cores,omitempty"`
	CeilingTasksPerSecond *float64 `json:"ceiling_tasks_per_second,omitempty"`
}

// Latency is one call's percentiles over the measured phase, in ms.
type Latency struct {
	Call       string  `json:"call"`
	Calls      uint64  `json:"calls"`
	P50        float64 `json:"p50_ms"`
	P95        float64 `json:"p95_ms"`
	P99        float64 `json:"p99_ms"`
	Errors     int64   `json:"errors"`
	FirstError string  `json:"first_error,omitempty"`
}

// NodeReport is one server: its resident memory after start (before any
// load) and at the end, and its CPU use over the measured phase.
type NodeReport struct {
	URL string `json:"url"`
	PID int    `json:"pid,omitempty"`
	// Workers is how many workers this node served (dealt round-robin).
	Workers      int      `json:"workers"`
	IdleRSSBytes *int64   `json:"idle_rss_bytes"`
	EndRSSBytes  *int64   `json:"end_rss_bytes"`
	CPUCores     *float64 `json:"cpu_cores"`
	// From is where memory and CPU were read: proc, metrics or "".
	From string `json:"from"`
}

// Validate checks the options and fills defaults; Load calls it too.
func (o *LoadOptions) Validate() error {
	if o.Workers < 1 {
		return errors.New("--workers must be at least 1")
	}
	if o.Backlog < 0 || o.Duration < 0 {
		return errors.New("--backlog and --duration must be ≥ 0")
	}
	if o.Backlog == 0 && o.Duration == 0 {
		return errors.New("--duration must be positive")
	}
	if o.Batch < 0 || o.Batch > 100 || o.Batch > 1 && o.Backlog == 0 {
		return errors.New("--batch must be 1–100, with --backlog")
	}
	if o.NoOpDuration < 0 {
		return errors.New("--noop-duration must be ≥ 0")
	}
	if o.NoOpDuration == 0 {
		o.NoOpDuration = cmp.Or(o.Duration, noOpDefault)
	}
	if o.Store == "" {
		o.Store = "sqlite"
	}
	if o.Nodes == 0 {
		o.Nodes = 1
	}
	if o.Window <= 0 {
		o.Window = 5 * time.Second
	}
	if o.URL != "" {
		if o.Key == "" {
			return errors.New("--url needs --key, an admin key of that server")
		}
		if o.Nodes != 1 {
			return errors.New("--nodes starts servers; with --url the bench uses the one server given")
		}
		return nil
	}
	if o.Nodes < 1 {
		return errors.New("--nodes must be at least 1")
	}
	if o.Nodes > 1 && !isPostgres(o.Store) {
		return fmt.Errorf("--nodes %d needs a PostgreSQL store (--store postgres://…): a SQLite store is one file that one server writes", o.Nodes)
	}
	if o.Binary == "" {
		return errors.New("no tessera binary to start")
	}
	return nil
}

func isPostgres(store string) bool {
	return strings.HasPrefix(store, "postgres://") || strings.HasPrefix(store, "postgresql://")
}

// run is one bench load in progress.
type run struct {
	o       LoadOptions
	nodes   []*node
	admins  []*client.Client // per node, main namespace
	admin   *client.Client   // node 0, in the bench namespace
	key     string           // the admin key
	workers []*worker
	rep     *LoadReport
}

func (r *run) progress(format string, args ...any) {
	if r.o.Progress != nil {
		fmt.Fprintf(r.o.Progress, "bench load: "+format+"\n", args...)
	}
}

// Load runs the bench. An error means it could not run; a run whose
// verification failed returns its report with Verify.Pass false.
func Load(ctx context.Context, o LoadOptions) (*LoadReport, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	r := &run{o: o, rep: &LoadReport{Mode: "lifecycle", Workers: o.Workers, Store: o.Store, Public: o.Public,
		CallsPerTask: 4, Heartbeat: !o.NoHeartbeat, StorePerTask: map[string]float64{}, WindowSeconds: o.Window.Seconds()}}
	if o.Backlog > 0 {
		r.rep.Mode, r.rep.CallsPerTask = "backlog", 3
	}
	if o.NoHeartbeat {
		r.rep.CallsPerTask--
	}
	if o.Batch > 1 {
		r.rep.CallsPerTask, r.rep.Batch = 1, o.Batch
	}
	key := o.Key
	if o.URL != "" {
		n := &node{url: strings.TrimRight(o.URL, "/"), pid: o.PID, debugURL: strings.TrimRight(o.DebugURL, "/")}
		if err := n.waitHealthy(ctx, 5*time.Second); err != nil {
			return nil, err
		}
		r.nodes = []*node{n}
		r.rep.Store = "(the server at --url)"
	} else {
		dir, err := os.MkdirTemp("", "tessera-bench-load-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		r.progress("starting %d × %s serve --store %s", o.Nodes, o.Binary, o.Store)
		if r.nodes, key, err = startNodes(ctx, o, dir); err != nil {
			return nil, err
		}
		defer stopNodes(r.nodes)
	}
	for i, n := range r.nodes {
		r.rep.Nodes = append(r.rep.Nodes, NodeReport{URL: n.url, PID: n.pid, Workers: (o.Workers + len(r.nodes) - 1 - i) / len(r.nodes)})
	}
	r.key = key
	hc := newHTTPClient(len(r.nodes))
	for _, n := range r.nodes {
		c, err := client.New(n.url, client.WithKey(r.key), client.WithHTTPClient(hc))
		if err != nil {
			return nil, err
		}
		r.admins = append(r.admins, c)
	}
	r.sampleIdle(ctx)
	if err := r.setUp(ctx); err != nil {
		return nil, err
	}
	if err := r.measure(ctx); err != nil {
		return nil, err
	}
	return r.rep, nil
}

// sampleIdle reads each server's memory before any load: started servers
// right after /healthz answered.
func (r *run) sampleIdle(ctx context.Context) {
	for i, s := range sampleAll(ctx, r.admins, r.nodes) {
		if s.procFrom != "" {
			rss := s.rssBytes
			r.rep.Nodes[i].IdleRSSBytes, r.rep.Nodes[i].From = &rss, s.procFrom
		}
	}
}

// newHTTPClient is the keep-alive client every worker shares: enough idle
// connections per host that no worker ever dials again.
func newHTTPClient(conns int) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 0
	t.MaxIdleConnsPerHost = conns + 8
	return &http.Client{Transport: t}
}

// setUp makes the bench namespace, a principal and key per worker, and
// runs one lifecycle per worker (so first-request costs — key lookups,
// profiles, the namespace's creation — stay out of the measurement).
func (r *run) setUp(ctx context.Context) error {
	suffix, err := randomString(8, 36)
	if err != nil {
		return err
	}
	ns := "bench-" + suffix
	r.rep.Namespace = ns
	r.admin = r.admins[0].InNamespace(ns)
	r.progress("creating %d worker keys in namespace %s", r.o.Workers, ns)
	// A worker's calls are not retried by the client: a refusal is
	// counted, and repeated (or not) by the worker itself.
	hc := newHTTPClient(r.o.Workers)
	for i := 0; i < r.o.Workers; i++ {
		admin := r.admins[i%len(r.nodes)]
		p, err := admin.CreatePrincipal(ctx, client.PrincipalRequest{Kind: "agent", DisplayName: fmt.Sprintf("bench worker %d", i)})
		if err != nil {
			return fmt.Errorf("create worker principal: %w", err)
		}
		k, err := admin.CreateKey(ctx, client.KeyRequest{PrincipalID: p.ID, Scopes: []string{"namespace:" + ns, "read", "enqueue", "claim"}})
		if err != nil {
			return fmt.Errorf("create worker key: %w", err)
		}
		base := r.nodes[i%len(r.nodes)].url
		c, err := client.New(base, client.WithKey(k.Secret), client.WithNamespace(ns), client.WithHTTPClient(hc),
			client.WithRetry(client.RetryPolicy{Attempts: 1}), client.WithUserAgent("tessera-bench-load"))
		if err != nil {
			return err
		}
		r.workers = append(r.workers, &worker{id: i, c: c, key: k.Secret, public: r.o.Public, heartbeat: !r.o.NoHeartbeat, batch: r.o.Batch, seen: map[string]taskSeen{}})
	}
	warm := &phase{alive: r.alive}
	warm.end(30 * time.Second) // claims wait for the others' tasks, not forever
	stats := r.eachWorker(ctx, func(w *worker) {
		if w.enqueue(ctx) {
			w.work(ctx, warm, lifecycleWait, false)
		}
	})
	if n := stats.failures(); n > 0 || warm.done.Load() != int64(len(r.workers)) {
		return fmt.Errorf("warm-up: %d of %d lifecycles done, %d calls failed (%s)", warm.done.Load(), len(r.workers), n, firstFailure(stats))
	}
	return nil
}

func firstFailure(s *callStats) string {
	for k, e := range s.firstErr {
		if e != "" {
			return callNames[k] + ": " + e
		}
	}
	return "no error"
}

func (r *run) alive() bool {
	for _, n := range r.nodes {
		if !n.alive() {
			return false
		}
	}
	return true
}

// eachWorker runs fn on every worker at once with fresh call stats, and
// returns their merged stats.
func (r *run) eachWorker(ctx context.Context, fn func(*worker)) *callStats {
	var wg sync.WaitGroup
	for _, w := range r.workers {
		w.st = &callStats{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(w)
		}()
	}
	wg.Wait()
	sum := &callStats{}
	for _, w := range r.workers {
		sum.merge(w.st)
	}
	return sum
}
