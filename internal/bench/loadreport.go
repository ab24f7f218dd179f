package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteLoad prints a report for people; --json prints LoadReport itself.
func WriteLoad(w io.Writer, rep *LoadReport) {
	visibility := "private"
	if rep.Public {
		visibility = "public"
	}
	what := "claim → heartbeat → submit"
	if !rep.Heartbeat {
		what = "claim → submit"
	}
	if rep.Mode == "backlog" {
		what = "work-off: " + what
	} else {
		what = "enqueue → " + what
	}
	fmt.Fprintf(w, "tessera bench load: %s (%s), %d workers, store %s, namespace %s, %s tasks\n",
		rep.Mode, what, rep.Workers, rep.Store, rep.Namespace, visibility)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if b := rep.Backlog; b != nil {
		how := b.Method
		if b.Note != "" {
			how += " (" + b.Note + ")"
		}
		fmt.Fprintf(tw, "backlog\t%d tasks enqueued by %s in %.2f s = %.1f tasks/s, rows written/task %s\n",
			b.Tasks, how, b.Seconds, b.TasksPerSecond, optional(b.RowsWritten, "%.2f"))
	}
	fmt.Fprintf(tw, "tasks\t%d in %.2f s = %.1f tasks/s\n", rep.Tasks, rep.Seconds, rep.TasksPerSecond)
	var windows []string
	for _, win := range rep.Windows {
		windows = append(windows, fmt.Sprintf("%.0f", win.TasksPerSecond))
	}
	if n := len(rep.Windows); n > 0 {
		fmt.Fprintf(tw, "tasks/s per window\t%s  (windows of %.0f s, the last %.1f s)\n",
			strings.Join(windows, " "), rep.WindowSeconds, rep.Windows[n-1].Seconds)
	}
	fmt.Fprintf(tw, "no-op\t%.0f req/s (%.0f before the load, %.0f after; same client, %d workers, %.1f s, %d errors)\n",
		rep.NoOp.RequestsPerSecond, rep.NoOp.BeforeRequestsPerSecond, rep.NoOp.AfterRequestsPerSecond, rep.Workers, rep.NoOp.Seconds, rep.NoOp.Errors)
	if rep.Batch > 1 {
		fmt.Fprintf(tw, "batches\tof up to %d tasks: a batch claim and a batch submit each; a call below is a task's share of them\n", rep.Batch)
	}
	fmt.Fprintf(tw, "ratio\t%.4f  (tasks/s × %d calls ÷ no-op req/s)\n", rep.Ratio, rep.CallsPerTask)
	fmt.Fprintf(tw, "rows/task\twritten %s, read %s (%s)\n", optional(rep.RowsWrittenPerTask, "%.2f"),
		optional(rep.RowsReadPerTask, "%.2f"), orNA(rep.RowsFrom))
	var store []string
	for _, name := range sortedKeys(rep.StorePerTask) {
		store = append(store, fmt.Sprintf("%s %.4g", name, rep.StorePerTask[name]))
	}
	fmt.Fprintf(tw, "commits, fsyncs/task\t%s\n", orNA(strings.Join(store, ", ")))
	if len(rep.WritePhases) > 0 {
		var phases []string
		for _, p := range rep.WritePhases {
			phases = append(phases, fmt.Sprintf("%s %.3f", p.Phase, p.MeanMS))
		}
		fmt.Fprintf(tw, "write phases\t%s  (mean ms per write transaction)\n", strings.Join(phases, ", "))
	}
	for _, n := range rep.Nodes {
		pid := ""
		if n.PID > 0 {
			pid = fmt.Sprintf(" (pid %d)", n.PID)
		}
		fmt.Fprintf(tw, "server\t%s%s, %d workers: RSS idle %s, end %s; CPU %s cores (%s)\n", n.URL, pid, n.Workers,
			mib(n.IdleRSSBytes), mib(n.EndRSSBytes), optional(n.CPUCores, "%.2f"), orNA(n.From))
	}
	fmt.Fprintf(tw, "bench CPU\t%s cores\n", optional(rep.BenchCPUCores, "%.2f"))
	if c := rep.CPU; c != nil {
		line := fmt.Sprintf("server %.0f µs, load generator %.0f µs; no-op %s µs (its client and handler)",
			c.ServerMicros, c.BenchMicros, optional(rep.NoOp.CPUMicrosPerRequest, "%.0f"))
		if c.CeilingTasksPerSecond != nil {
			line += fmt.Sprintf("; all %d cores would be busy at %.0f tasks/s, %.0f%% of that reached",
				c.Cores, *c.CeilingTasksPerSecond, 100*rep.TasksPerSecond / *c.CeilingTasksPerSecond)
		}
		fmt.Fprintf(tw, "CPU per call\t%s\n", line)
	}
	if rep.CPUProfile != "" {
		fmt.Fprintf(tw, "cpu profile\t%s\n", rep.CPUProfile)
	}
	fmt.Fprintf(tw, "empty claims\t%d\n", rep.EmptyClaims)
	tw.Flush()

	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "call\tcalls\tp50 ms\tp95 ms\tp99 ms\terrors\t")
	for _, l := range rep.Latency {
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t%.2f\t%d\t\n", l.Call, l.Calls, l.P50, l.P95, l.P99, l.Errors)
	}
	tw.Flush()
	for _, l := range rep.Latency {
		if l.FirstError != "" {
			fmt.Fprintf(w, "first %s error: %s\n", l.Call, l.FirstError)
		}
	}
	if v := rep.Verify; v != nil {
		verdict := "PASS"
		if !v.Pass {
			verdict = "FAIL"
		}
		fmt.Fprintf(w, "verify: %s: %d enqueued, %d succeeded, %d lost, %d left in the backlog, %d submitted twice, %d leased twice, %d unacknowledged, %d failed calls; %d tasks listed, %s\n",
			verdict, v.Enqueued, v.Succeeded, v.Lost, v.Left, v.SubmittedTwice, v.LeasedTwice, v.Unacknowledged, v.FailedCalls, v.ServerListed, v.Sampling)
		for _, p := range v.Problems {
			fmt.Fprintf(w, "  %s\n", p)
		}
		for _, kind := range sortedKeys(v.Examples) {
			fmt.Fprintf(w, "  %s, e.g. %s\n", kind, strings.Join(v.Examples[kind], " "))
		}
	}
}

func optional(v *float64, format string) string {
	if v == nil {
		return "n/a"
	}
	return fmt.Sprintf(format, *v)
}

func orNA(s string) string {
	if s == "" {
		return "n/a"
	}
	return s
}

func mib(b *int64) string {
	if b == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.1f MiB", float64(*b)/(1<<20))
}
