package httpapi_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/app"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// logBuffer collects a server's log while the test reads it.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// lines returns the log lines holding msg.
func (l *logBuffer) lines(msg string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.b.String(), "\n") {
		if strings.Contains(line, msg) {
			out = append(out, line)
		}
	}
	return out
}

// loggedServer is a test server whose warnings land in the returned buffer.
func loggedServer(t *testing.T, dir string, clock *tessera.ManualClock) (*testServer, func(), *logBuffer) {
	logs := &logBuffer{}
	s, stop := serverWith(t, dir, clock, func(o *app.Options) {
		o.Log = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	return s, stop, logs
}

// The housekeeping that runs behind requests says when it fails, and what
// that lost or will retry: counter flushes, retention and upload sweeps.
func TestBackgroundFailuresAreLogged(t *testing.T) {
	t.Parallel()
	// Noon UTC, so the hour it advances stays in the day whose allowance
	// it spends: from 23:00 on, the day's rollover made every write
	// possible again and nothing failed to log.
	clock := tessera.NewManualClock(time.Now().UTC().Truncate(24 * time.Hour).Add(12 * time.Hour))
	s, stop, logs := loggedServer(t, t.TempDir(), clock)
	s.declare(201, "main", adminKey, []byte("never sent"), nil)
	spendAllowance(t, s) // from here storage refuses every write
	wantError(t, s.do("GET", "/v1/me", "tsk_nobody_abcdefghijklmnopqrstuvwxyz0123", nil), 401, "unauthorized", "")
	// Two counters wait: the declare (a pre-check, counted) and the 401.
	// An hour on, the upload is past its time and the counters' minute
	// has passed: the next housekeeping pass (every 10 s) tries them all.
	clock.Advance(61 * time.Minute)
	want := map[string]string{
		"counter flush failed; the counters stay buffered for the next flush": "counters not written (2)",
		"retention pass failed": "storage_quota_exhausted",
		"upload sweep failed":   "storage_quota_exhausted",
	}
	deadline := time.Now().Add(20 * time.Second)
	for msg, detail := range want {
		for len(logs.lines(msg)) == 0 && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		lines := logs.lines(msg)
		if len(lines) == 0 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], detail) {
			t.Errorf("no warning %q with %q; got %q", msg, detail, lines)
		}
	}
	// At shutdown the counters still refused are lost, and it says so.
	stop()
	if lines := logs.lines("counters lost: the final flush failed"); len(lines) != 1 || !strings.Contains(lines[0], "counters not written (2)") {
		t.Errorf("final flush: %q", lines)
	}
}
