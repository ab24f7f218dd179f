package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/tessera-dev/tessera/client"
)

const (
	// stopGrace is how long, after the duration, a worker's last claim
	// may still wait for a task (its own enqueue was taken by another).
	stopGrace = 15 * time.Second
	// drainLimit bounds the drain after a lifecycle run: tasks a failed
	// call left ready are worked off so they are not counted lost.
	drainLimit = 10 * time.Second
	// noOpDefault is the baseline's length when the run has no duration
	// (a backlog worked off to the end).
	noOpDefault = 10 * time.Second
)

// measure runs the no-op baseline, the backlog if asked, the measured
// phase, and the verification, filling r.rep.
func (r *run) measure(ctx context.Context) error {
	stats := &callStats{}
	if r.o.Backlog > 0 {
		s, err := r.backlog(ctx)
		if err != nil {
			return err
		}
		stats.merge(s)
	}
	// The baseline runs half just before the load and half just after,
	// so whatever else the machine does then weighs on both alike.
	firstHalf := r.o.NoOpDuration / 2
	r.progress("no-op baseline: %d workers for %s, and as long after the load", len(r.workers), firstHalf)
	noOpBefore, err := r.noOp(ctx, firstHalf)
	if err != nil {
		return err
	}

	p := &phase{alive: r.alive}
	before := sampleAll(ctx, r.admins, r.nodes)
	_, benchCPU0, benchOK := procStatus(os.Getpid())
	start := time.Now()
	r.progress("%s load: %d workers%s", r.rep.Mode, len(r.workers), r.durationNote())
	windows := r.watchWindows(p, start)
	profile := r.profile(ctx)
	if r.o.Duration > 0 {
		t := time.AfterFunc(r.o.Duration, func() { p.end(stopGrace) })
		defer t.Stop()
	}
	stats.merge(r.eachWorker(ctx, func(w *worker) {
		if r.o.Backlog > 0 {
			w.workOff(ctx, p)
		} else {
			w.lifecycles(ctx, p)
		}
	}))
	elapsed := time.Since(start)
	r.rep.Windows = windows()
	after := sampleAll(ctx, r.admins, r.nodes)
	_, benchCPU1, _ := procStatus(os.Getpid())
	if err := ctx.Err(); err != nil {
		return err
	}
	if !r.alive() {
		return fmt.Errorf("a server exited during the run:\n%s", r.deadNodeLog())
	}
	noOpAfter, err := r.noOp(ctx, r.o.NoOpDuration-firstHalf)
	if err != nil {
		return err
	}
	r.rep.NoOp = combineNoOp(noOpBefore, noOpAfter)

	r.rep.Seconds = elapsed.Seconds()
	r.rep.Tasks = p.done.Load()
	r.rep.TasksPerSecond = float64(r.rep.Tasks) / r.rep.Seconds
	if r.rep.NoOp.RequestsPerSecond > 0 {
		r.rep.Ratio = r.rep.TasksPerSecond * float64(r.rep.CallsPerTask) / r.rep.NoOp.RequestsPerSecond
	}
	if benchOK {
		cores := (benchCPU1 - benchCPU0).Seconds() / elapsed.Seconds()
		r.rep.BenchCPUCores = &cores
	}
	d := deltaPerTask(before, after, r.rep.Tasks)
	r.rep.RowsWrittenPerTask, r.rep.RowsReadPerTask, r.rep.RowsFrom, r.rep.StorePerTask = d.RowsWritten, d.RowsRead, d.From, d.StoreCounters
	r.rep.WritePhases = d.WritePhases
	r.nodeFigures(before, after, elapsed)
	r.rep.CPU = cpuPerCall(r.rep, runtime.NumCPU())
	r.rep.Latency, r.rep.EmptyClaims = latencies(stats), stats.empty
	r.rep.CPUProfile = profile()

	if r.o.Backlog == 0 {
		stats.merge(r.drain(ctx))
	}
	r.progress("verifying")
	seen, unsure := r.ledger()
	v, err := verify(ctx, r.admin, seen, verifyOptions{capped: r.o.Backlog > 0 && p.stop.Load(), unsure: unsure,
		failed: stats.failures(), recheckFor: 10 * time.Second})
	if err != nil {
		return err
	}
	r.rep.Verify = v
	return nil
}

func (r *run) durationNote() string {
	switch {
	case r.o.Backlog > 0 && r.o.Duration > 0:
		return fmt.Sprintf(" until the backlog is worked off, at most %s", r.o.Duration)
	case r.o.Backlog > 0:
		return " until the backlog is worked off"
	}
	return " for " + r.o.Duration.String()
}

// backlog enqueues the backlog and reports how, and what it cost.
func (r *run) backlog(ctx context.Context) (*callStats, error) {
	useBatch, err := hasRoute(ctx, r.admins[0], "post", batchPath)
	if err != nil {
		return nil, err
	}
	r.progress("enqueueing a backlog of %d tasks (batch route: %v)", r.o.Backlog, useBatch)
	before := sampleAll(ctx, r.admins, r.nodes)
	for _, w := range r.workers {
		w.st = &callStats{}
	}
	rep, err := enqueueBacklog(ctx, r.workers, r.o.Backlog, useBatch)
	if err != nil {
		return nil, err
	}
	stats := &callStats{}
	for _, w := range r.workers {
		stats.merge(w.st)
	}
	seen, _ := r.ledger()
	rep.Tasks = 0
	for _, s := range seen {
		if s.enqueued && s.claims == 0 {
			rep.Tasks++
		}
	}
	rep.RowsWritten = deltaPerTask(before, sampleAll(ctx, r.admins, r.nodes), rep.Tasks).RowsWritten
	r.rep.Backlog = rep
	return stats, nil
}

// watchWindows counts tasks done per window while the phase runs; the
// func it returns stops it and gives the windows, the last one partial.
// The windows are ticks of one timer, each as long as it really was.
func (r *run) watchWindows(p *phase, start time.Time) func() []Window {
	var mu sync.Mutex
	var out []Window
	var last int64
	lastAt := start
	add := func(now time.Time) {
		done := p.done.Load()
		secs := now.Sub(lastAt).Seconds()
		out = append(out, Window{StartSeconds: lastAt.Sub(start).Seconds(), Seconds: secs, Tasks: done - last,
			TasksPerSecond: float64(done-last) / secs})
		last, lastAt = done, now
	}
	t := time.NewTicker(r.o.Window)
	stop := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case now := <-t.C:
				mu.Lock()
				add(now)
				mu.Unlock()
			case <-stop:
				return
			}
		}
	}()
	return func() []Window {
		t.Stop()
		close(stop)
		<-finished
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		switch {
		case now.Sub(lastAt) >= time.Second || len(out) == 0:
			add(now)
		case p.done.Load() > last:
			// A tail under a second (the last iterations after the
			// duration) would show as a wild rate: it joins the
			// window before it.
			prev := out[len(out)-1]
			out, last, lastAt = out[:len(out)-1], last-prev.Tasks, start.Add(time.Duration(prev.StartSeconds*float64(time.Second)))
			add(now)
		}
		return out
	}
}

// nodeFigures fills each node's end memory and CPU use.
func (r *run) nodeFigures(before, after []nodeSample, elapsed time.Duration) {
	for i := range r.rep.Nodes {
		n := &r.rep.Nodes[i]
		if after[i].procFrom == "" {
			continue
		}
		rss := after[i].rssBytes
		n.EndRSSBytes, n.From = &rss, after[i].procFrom
		if before[i].procFrom == after[i].procFrom {
			cores := (after[i].cpu - before[i].cpu).Seconds() / elapsed.Seconds()
			n.CPUCores = &cores
		}
	}
}

func (r *run) deadNodeLog() string {
	for _, n := range r.nodes {
		if !n.alive() {
			return fmt.Sprintf("%s (pid %d): %v%s", n.url, n.pid, n.cmd.ProcessState, n.logTail())
		}
	}
	return ""
}

// drain works off what failed calls of a lifecycle run left ready, with
// one worker, so they are not counted lost.
func (r *run) drain(ctx context.Context) *callStats {
	w := r.workers[0]
	w.st = &callStats{}
	p := &phase{alive: r.alive}
	deadline := time.Now().Add(drainLimit)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if _, empty := w.work(ctx, p, 0, true); empty {
			break
		}
	}
	return w.st
}

// ledger merges what the workers saw, and how many tasks their failed
// enqueues may have made.
func (r *run) ledger() (map[string]taskSeen, int) {
	seen := map[string]taskSeen{}
	unsure := 0
	for _, w := range r.workers {
		unsure += w.unsure
		for id, s := range w.seen {
			m := seen[id]
			m.enqueued = m.enqueued || s.enqueued
			m.claims += s.claims
			m.submits += s.submits
			seen[id] = m
		}
	}
	return seen, unsure
}

func latencies(s *callStats) []Latency {
	var out []Latency
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	for k := range numCalls {
		h := &s.lat[k]
		if h.n == 0 && s.errs[k] == 0 {
			continue // not made in this run (batches, or singles beside them)
		}
		out = append(out, Latency{Call: callNames[k], Calls: h.n, P50: ms(h.quantile(0.50)), P95: ms(h.quantile(0.95)),
			P99: ms(h.quantile(0.99)), Errors: s.errs[k], FirstError: s.firstErr[k]})
	}
	return out
}

func combineNoOp(before, after NoOp) NoOp {
	out := NoOp{Requests: before.Requests + after.Requests, Seconds: before.Seconds + after.Seconds,
		Errors: before.Errors + after.Errors, BeforeRequestsPerSecond: before.RequestsPerSecond, AfterRequestsPerSecond: after.RequestsPerSecond}
	out.RequestsPerSecond = float64(out.Requests) / out.Seconds
	if before.cpuOK && after.cpuOK && out.Requests > 0 {
		us := (before.cpu + after.cpu).Seconds() * 1e6 / float64(out.Requests)
		out.CPUMicrosPerRequest = &us
	}
	return out
}

// cpuPerCall is the measured phase's CPU per call, or nil when a figure
// is missing. The ceiling needs every server's CPU from /proc: only then
// is each a process of this machine apart from this one (a server in
// this process, as in tests, is in the bench's CPU too).
func cpuPerCall(rep *LoadReport, cores int) *CPUPerCall {
	calls := float64(rep.Tasks) * float64(rep.CallsPerTask)
	if calls == 0 || rep.BenchCPUCores == nil || len(rep.Nodes) == 0 {
		return nil
	}
	perCall := func(c float64) float64 { return c * rep.Seconds * 1e6 / calls }
	out := &CPUPerCall{BenchMicros: perCall(*rep.BenchCPUCores)}
	local := true
	for _, n := range rep.Nodes {
		if n.CPUCores == nil {
			return nil
		}
		out.ServerMicros += perCall(*n.CPUCores)
		local = local && n.From == "proc"
	}
	if local {
		ceiling := float64(cores) * 1e6 / ((out.ServerMicros + out.BenchMicros) * float64(rep.CallsPerTask))
		out.Cores, out.CeilingTasksPerSecond = cores, &ceiling
	}
	return out
}

// noOp serves a handler that reads the request and answers a fixed task
// body, on loopback, and drives it for d with the same client, workers,
// keys and enqueue requests as the load: what the client and the
// machine can do when the server costs nothing.
func (r *run) noOp(ctx context.Context, d time.Duration) (NoOp, error) {
	answer, err := json.Marshal(r.workers[0].first)
	if err != nil {
		return NoOp{}, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return NoOp{}, err
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(answer)
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	hc := newHTTPClient(len(r.workers))
	counts := make([][2]int64, len(r.workers)) // requests, errors
	_, cpu0, cpuOK := procStatus(os.Getpid())
	deadline := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for i, w := range r.workers {
		c, err := client.New("http://"+ln.Addr().String(), client.WithKey(w.key), client.WithNamespace(w.c.Namespace()),
			client.WithHTTPClient(hc), client.WithRetry(client.RetryPolicy{Attempts: 1}), client.WithUserAgent("tessera-bench-load"))
		if err != nil {
			return NoOp{}, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && ctx.Err() == nil {
				if _, err := c.Enqueue(ctx, w.enqueueRequest()); err != nil {
					counts[i][1]++
					continue
				}
				counts[i][0]++
			}
		}()
	}
	wg.Wait()
	out := NoOp{Seconds: time.Since(start).Seconds()}
	if _, cpu1, ok := procStatus(os.Getpid()); ok && cpuOK {
		out.cpu, out.cpuOK = cpu1-cpu0, true
	}
	for _, c := range counts {
		out.Requests += c[0]
		out.Errors += c[1]
	}
	out.RequestsPerSecond = float64(out.Requests) / out.Seconds
	return out, ctx.Err()
}

// profile fetches a CPU profile of the first server over the middle of
// the run from its --debug-addr; the func it returns waits for it and says
// what happened.
func (r *run) profile(ctx context.Context) func() string {
	if r.o.CPUProfile == "" {
		return func() string { return "" }
	}
	if r.nodes[0].debugURL == "" {
		return func() string { return "skipped: no --debug-url for the server at --url" }
	}
	offset, length := 5*time.Second, 20*time.Second
	if r.o.Duration > 0 {
		offset, length = r.o.Duration/4, max(r.o.Duration/2, time.Second)
	}
	result := make(chan string, 1)
	go func() {
		pause(ctx, offset)
		result <- fetchProfile(ctx, r.nodes[0].debugURL, r.o.CPUProfile, length)
	}()
	return func() string { return <-result }
}

func fetchProfile(ctx context.Context, base, file string, length time.Duration) string {
	u := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", base, int(length/time.Second))
	res, err := rawRequest(ctx, newHTTPClient(1), "GET", u, "", nil, nil)
	if err != nil {
		return "skipped: " + err.Error()
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Sprintf("skipped: GET %s answered %d", u, res.StatusCode)
	}
	f, err := os.Create(file)
	if err != nil {
		return "skipped: " + err.Error()
	}
	if _, err := io.Copy(f, res.Body); err != nil {
		f.Close()
		return "failed: " + err.Error()
	}
	if err := f.Close(); err != nil {
		return "failed: " + err.Error()
	}
	return fmt.Sprintf("%s (%s from %s)", file, length, base)
}
