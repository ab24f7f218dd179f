package sqlite

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// BenchmarkLifecycle runs enqueue → claim → heartbeat → submit through
// the core, without HTTP, from 16 and 64 goroutines at once: what the
// committer and the syncer cost a task when writes queue for them. It
// reports commits and fsyncs per task beside ns/op (one op, one task).
//
//	go test -run '^$' -bench Lifecycle -benchtime 5000x ./internal/store/sqlite/
func BenchmarkLifecycle(b *testing.B) {
	for _, workers := range []int{16, 64} {
		b.Run(fmt.Sprint("workers=", workers), func(b *testing.B) {
			// A client address, as every request through HTTP has: the
			// audit trail hashes it.
			ctx := core.WithClient(context.Background(), netip.MustParseAddr("192.0.2.10"))
			clock := tessera.SystemClock{}
			m := meter.New(clock)
			db := tempStore(b, m)
			cfg := core.DefaultConfig()
			cfg.ClaimRate, cfg.ClaimBurst, cfg.ClaimConcurrency = 1e9, 1e9, 1e6
			svc, a := adminService(b, db, m, clock, cfg)
			defer svc.Close()
			before := db.CommitStats()
			b.SetParallelism(max(1, workers/ncpu()))
			cpu0, cpuOK := processCPU()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := lifecycle(ctx, svc, a); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			// The process's CPU a task, beside the wall time: on a machine
			// other work shares, only this is the lifecycle's own.
			if cpu1, ok := processCPU(); ok && cpuOK {
				b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/task")
			}
			after := db.CommitStats()
			b.ReportMetric(float64(after.Commits-before.Commits)/float64(b.N), "commits/task")
			b.ReportMetric(float64(after.Syncs-before.Syncs)/float64(b.N), "fsyncs/task")
		})
	}
}

func ncpu() int { return runtime.GOMAXPROCS(0) }

// processCPU is the CPU time this process has used, where the system
// tells it.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

// lifecycle enqueues a task and works one off: every claimer enqueued
// before it claims, so one is always ready.
func lifecycle(ctx context.Context, svc *core.Service, a *auth.Actor) error {
	if _, err := svc.Enqueue(ctx, a, "main", core.EnqueueParams{Title: "t", Queue: "q"}, tessera.RandomToken(12)); err != nil {
		return err
	}
	c, err := svc.Claim(ctx, a, "main", core.ClaimParams{Queue: "q"})
	if err != nil {
		return err
	}
	if c.Lease == nil {
		return fmt.Errorf("claim found nothing ready")
	}
	if _, err := svc.Heartbeat(ctx, a, "main", c.Task.ID, core.HeartbeatParams{LeaseToken: c.Lease.Token}); err != nil {
		return err
	}
	_, err = svc.Submit(ctx, a, "main", c.Task.ID, core.SubmitParams{LeaseToken: c.Lease.Token, Outcome: tessera.OutcomeSucceeded}, tessera.RandomToken(12))
	return err
}
