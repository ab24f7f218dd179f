package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/ops"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// serverMetrics is what GET /metrics exposes (SPEC §14, §15), through
// prometheus/client_golang on a registry of this server's own (tests run
// many servers in one process): request counts and latency by route, the
// claim wait, queue depths and lease state, run ends and dead tasks,
// storage rows and the allowance, and the Go and process collectors.
type serverMetrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

// requestBuckets reach past the long-polls (claims wait up to 20 s,
// claim events 30 s).
var requestBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20, 30}

func newServerMetrics(svc *core.Service, exec *ops.Exec) *serverMetrics {
	m := &serverMetrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tessera_http_requests_total", Help: "HTTP requests by route (the route table's pattern) and status.",
		}, []string{"route", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "tessera_http_request_duration_seconds", Help: "Time to serve an HTTP request, by route; long-polls included.",
			Buckets: requestBuckets,
		}, []string{"route"}),
	}
	m.registry.MustRegister(m.requests, m.latency, coreCollector{svc},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.registry.MustRegister(exec.Collectors()...)
	return m
}

func (m *serverMetrics) observe(route string, status int, d time.Duration) {
	if route == "" {
		route = "unmatched"
	}
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	m.latency.WithLabelValues(route).Observe(d.Seconds())
}

// metrics serves the Prometheus text format. It needs an admin key unless
// the server was told otherwise.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	if rec, ok := w.(*statusRecorder); ok {
		rec.route = "GET /metrics"
	}
	// A scrape every few seconds is counted, not evented: it reads no
	// tenant's data and would otherwise fill the audit trail.
	principal := ""
	if !s.cfg.MetricsPublic {
		a, err := s.authenticate(r)
		if err == nil {
			principal = a.Principal.ID
			err = core.NeedOf(core.ActMetrics).Check(a, tessera.MainNamespace)
		}
		if err != nil {
			e := ops.Fault(err)
			writeError(w, e)
			s.core.Count(principal, tessera.MainNamespace, core.ActMetrics, string(e.Code))
			return
		}
	}
	s.core.Count(principal, tessera.MainNamespace, core.ActMetrics, "ok")
	promhttp.HandlerFor(s.metricsReg.registry, promhttp.HandlerOpts{ErrorLog: slogPrinter{s}}).ServeHTTP(w, r)
}

// slogPrinter lets promhttp report a failed collection to the server log.
type slogPrinter struct{ s *Server }

func (p slogPrinter) Println(v ...any) { p.s.log.Error("metrics", "err", v) }

// coreCollector reads the core's numbers at scrape time.
type coreCollector struct{ svc *core.Service }

var (
	descRowsWritten       = prometheus.NewDesc("tessera_storage_rows_written_total", "Storage rows written since start (each row changed plus one per index).", nil, nil)
	descRowsRead          = prometheus.NewDesc("tessera_storage_rows_read_total", "Storage rows read since start (rows returned plus full-scan steps).", nil, nil)
	descRowsWrittenToday  = prometheus.NewDesc("tessera_storage_rows_written_today", "Storage rows written this UTC day.", nil, nil)
	descRowsReadToday     = prometheus.NewDesc("tessera_storage_rows_read_today", "Storage rows read this UTC day.", nil, nil)
	descAllowance         = prometheus.NewDesc("tessera_storage_allowance_rows", "Daily storage allowance in rows (0 = unlimited).", []string{"kind"}, nil)
	descAllowanceLeft     = prometheus.NewDesc("tessera_storage_allowance_left_rows", "Rows left of today's allowance (only where one is set).", []string{"kind"}, nil)
	descQueueTasks        = prometheus.NewDesc("tessera_queue_tasks", "Tasks by namespace, queue and stored state (ready includes scheduled), public or not.", []string{"namespace", "queue", "state"}, nil)
	descQueueLeases       = prometheus.NewDesc("tessera_queue_leases", "Leases by namespace and queue: live, or expired but not yet noticed.", []string{"namespace", "queue", "state"}, nil)
	descQueueOldest       = prometheus.NewDesc("tessera_queue_oldest_ready_age_seconds", "How long the oldest claimable task of a queue has waited since its run_at.", []string{"namespace", "queue"}, nil)
	descQueueGroupReady   = prometheus.NewDesc("tessera_queue_ready_by_group", "Ready tasks (scheduled included) of a queue with lanes, by group (\"\": no group): the 10 groups of the queue with the most have a series each, the rest are summed under group \"other\".", []string{"namespace", "queue", "group"}, nil)
	descOmitted           = prometheus.NewDesc("tessera_queue_namespaces_truncated", "1 when namespaces were left out of the queue metrics: named ones past the first 256 by name, or demo ones past the first 256 summed into namespace \"demo-*\".", nil, nil)
	descRunsEnded         = prometheus.NewDesc("tessera_runs_ended_total", "Runs ended since start by namespace, queue and outcome (lapsed: the lease ran out).", []string{"namespace", "queue", "outcome"}, nil)
	descTasksDead         = prometheus.NewDesc("tessera_tasks_dead_total", "Tasks that used their last attempt since start, by namespace, queue and the outcome of that run.", []string{"namespace", "queue", "outcome"}, nil)
	descCommits           = prometheus.NewDesc("tessera_store_commits_total", "Write transactions the store committed since start, however many requests each carried (group commit): divided into tessera_store_write_transactions_total, how many shared a commit.", nil, nil)
	descSyncs             = prometheus.NewDesc("tessera_store_wal_fsyncs_total", "SQLite: fsyncs of the write-ahead log since start: one per commit, made while the next batch runs.", nil, nil)
	descSyncSeconds       = prometheus.NewDesc("tessera_store_wal_fsync_seconds_total", "SQLite: time spent in fsyncs of the write-ahead log since start.", nil, nil)
	descWrites            = prometheus.NewDesc("tessera_store_write_transactions_total", "Write transactions the store answered since start (each request that writes is one), however many shared a commit.", nil, nil)
	descWriteSeconds      = prometheus.NewDesc("tessera_store_write_transaction_seconds_total", "SQLite: time write transactions spent in each phase, summed over them: queued for the committer, running, batched (waiting for their batch to commit), committing, syncing (until the fsync that makes them durable), answering.", []string{"phase"}, nil)
	descScrapeError       = prometheus.NewDesc("tessera_queue_metrics_error", "1 when the queue metrics could not be read at this scrape.", nil, nil)
	descListenerHealthy   = prometheus.NewDesc("tessera_listener_healthy", "1 while the connection that hears other nodes (PostgreSQL LISTEN) is up and hears its probes; 0 while long-polls short-poll instead.", nil, nil)
	descListenerAge       = prometheus.NewDesc("tessera_listener_last_notify_age_seconds", "Seconds since the listening connection last heard a notification, its own probes (every 5 s) included.", nil, nil)
	descListenerPeers     = prometheus.NewDesc("tessera_listener_peers", "Other nodes heard in the last 17 s (their probes, every 5 s); while there are none, this node sends no notifications.", nil, nil)
	descNotificationsSent = prometheus.NewDesc("tessera_notifications_sent_total", "Notifications this node sent the other nodes (PostgreSQL NOTIFY), each carrying the topics of the commits a few milliseconds gathered.", nil, nil)
	descStreams           = prometheus.NewDesc("tessera_event_streams", "Live event streams open on this node, by holder: key, session (anonymous demo sessions, together at most a quarter of --max-streams) or keyless (the board's, together at most a quarter).", []string{"holder"}, nil)
	descStreamReads       = prometheus.NewDesc("tessera_event_stream_reads_total", "Reads of the audit trail by live streams since start: one per wake of each keyed stream, one per wake of the public feed for all keyless streams together.", nil, nil)
)

func (c coreCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRowsWritten, descRowsRead, descRowsWrittenToday, descRowsReadToday,
		descAllowance, descAllowanceLeft, descQueueTasks, descQueueLeases, descQueueOldest, descQueueGroupReady, descOmitted,
		descRunsEnded, descTasksDead, descCommits, descSyncs, descSyncSeconds, descWrites, descWriteSeconds, descScrapeError,
		descListenerHealthy, descListenerAge, descListenerPeers, descNotificationsSent, descStreams, descStreamReads} {
		ch <- d
	}
}

func (c coreCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	today := c.svc.Meter().Today()
	written, read := c.svc.Meter().Lifetime()
	counter(descRowsWritten, float64(written))
	counter(descRowsRead, float64(read))
	gauge(descRowsWrittenToday, float64(today.RowsWritten))
	gauge(descRowsReadToday, float64(today.RowsRead))
	for kind, v := range map[string][2]int64{"written": {today.Allowance.RowsWrittenPerDay, today.RowsWritten}, "read": {today.Allowance.RowsReadPerDay, today.RowsRead}} {
		gauge(descAllowance, float64(v[0]), kind)
		if v[0] > 0 {
			gauge(descAllowanceLeft, float64(max(v[0]-v[1], 0)), kind)
		}
	}

	if n, ok := c.svc.StoreCommits(); ok {
		counter(descCommits, float64(n.Commits))
		counter(descWrites, float64(n.Writes))
		if n.Syncing {
			counter(descSyncs, float64(n.Syncs))
			counter(descSyncSeconds, n.SyncTime.Seconds())
			for phase, d := range n.Phases() {
				counter(descWriteSeconds, d.Seconds(), phase)
			}
		}
	}

	if l, ok := c.svc.StoreListener(); ok {
		healthy := 0.0
		if l.Healthy {
			healthy = 1
		}
		gauge(descListenerHealthy, healthy)
		gauge(descListenerAge, time.Since(l.LastHeard).Seconds())
		gauge(descListenerPeers, float64(l.Peers))
		counter(descNotificationsSent, float64(l.Sent))
	}

	for holder, n := range c.svc.OpenStreamsByHolder() {
		gauge(descStreams, float64(n), holder)
	}
	counter(descStreamReads, float64(c.svc.StreamReads()))

	runs := c.svc.RunTotals()
	for k, n := range runs.Ended {
		counter(descRunsEnded, float64(n), k.Namespace, k.Queue, k.Outcome)
	}
	for k, n := range runs.Dead {
		counter(descTasksDead, float64(n), k.Namespace, k.Queue, k.Outcome)
	}

	// A scrape must not hang on a busy store.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	depths, err := c.svc.QueueDepths(ctx)
	if err != nil {
		// The store may refuse (the read allowance spent): the rest of
		// the scrape still answers, and says so.
		gauge(descScrapeError, 1)
		return
	}
	gauge(descScrapeError, 0)
	truncated := 0.0
	if depths.Truncated {
		truncated = 1
	}
	gauge(descOmitted, truncated)
	for _, q := range depths.Queues {
		for _, st := range core.StoredStates {
			gauge(descQueueTasks, float64(q.Counts[st]), q.Namespace, q.Queue, st)
		}
		gauge(descQueueLeases, float64(q.LiveLeases), q.Namespace, q.Queue, "live")
		gauge(descQueueLeases, float64(q.ExpiredLeases), q.Namespace, q.Queue, "expired")
		if q.OldestReadyAgeSeconds != nil {
			gauge(descQueueOldest, *q.OldestReadyAgeSeconds, q.Namespace, q.Queue)
		}
		for _, g := range q.ReadyByGroup {
			gauge(descQueueGroupReady, float64(g.Ready), q.Namespace, q.Queue, g.Group)
		}
	}
}
