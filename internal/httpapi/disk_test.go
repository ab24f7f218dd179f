//go:build linux

package httpapi_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/tessera-dev/tessera/internal/tessera"
)

// SPEC §5: storage that cannot serve for now is 503 unavailable with
// Retry-After, never 500 internal, which is for bugs.

// smallDisk mounts a tmpfs of size bytes, or skips where mounting is not
// permitted (CI runs as root and may mount).
func smallDisk(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		if errors.Is(err, syscall.EPERM) {
			t.Skipf("mounting a tmpfs is not permitted here: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// fill writes a file in dir until the disk is full; removing it frees
// the space again.
func fill(t *testing.T, dir string) (free func()) {
	t.Helper()
	name := filepath.Join(dir, "filler")
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	f.Close()
	return func() {
		if err := os.Remove(name); err != nil {
			t.Fatal(err)
		}
	}
}

// wantUnavailable fails unless r is 503 unavailable with Retry-After.
func wantUnavailable(t *testing.T, r *response, retryAfter string) {
	t.Helper()
	e := wantError(t, r, 503, "unavailable", "")
	if got := r.Header.Get("Retry-After"); got != retryAfter {
		t.Fatalf("Retry-After %q, want %q: %s", got, retryAfter, r.Body)
	}
	if !strings.Contains(e.Error.Message, "storage is unavailable") {
		t.Fatalf("message %q", e.Error.Message)
	}
}

func TestFullDiskIsUnavailable(t *testing.T) {
	if onPostgres {
		t.Skip("the SQLite file on a full disk; on PostgreSQL --data holds no store")
	}
	t.Parallel()
	disk := smallDisk(t, 4<<20)
	dir, fresh := filepath.Join(disk, "data"), filepath.Join(disk, "fresh")
	if err := os.Mkdir(fresh, 0o700); err != nil {
		t.Fatal(err)
	}
	clock := tessera.NewManualClock(time.Now())
	s, stop, logs := loggedServer(t, dir, clock)
	reader, _ := s.newKey("agent", "namespace:main", "read")
	s.enqueue("main", adminKey, map[string]any{"title": "before"})

	// Every write, and every keyed read (it writes its audit event),
	// is 503 with Retry-After; what needs no write still answers.
	free := fill(t, disk)
	big := map[string]any{"title": "full", "payload": strings.Repeat("p", 200<<10)}
	wantUnavailable(t, s.do("POST", "/v1/tasks", adminKey, big), "30")
	wantUnavailable(t, s.do("PUT", "/v1/records/b/k", adminKey, map[string]any{"value": strings.Repeat("v", 200<<10)}), "30")
	wantUnavailable(t, s.do("GET", "/v1/counts", reader, nil), "30")
	for _, p := range []string{"/healthz", "/v1/health", "/v1/openapi.json", "/connect.json"} {
		s.must(200, "GET", p, "", nil)
	}
	// The operator hears of it: the 503s (at most every 10 s), and the
	// meter's totals, synced every 2 s, kept for the next sync.
	if lines := logs.lines("storage unavailable: answering 503"); len(lines) != 1 || !strings.Contains(lines[0], "disk I/O error") {
		t.Errorf("503 warnings: %q", lines)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(logs.lines("meter totals not synced")) == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if lines := logs.lines("meter totals not synced"); len(lines) == 0 || !strings.Contains(lines[0], "kept for the next sync") {
		t.Errorf("meter sync warnings: %q", lines)
	}
	// Once there is room again, writes work, without a restart; the
	// refused enqueue did not happen.
	free()
	s.enqueue("main", adminKey, map[string]any{"title": "after"})
	if ids := s.listIDs("main", adminKey, ""); len(ids) != 2 {
		t.Fatalf("%d tasks, want the 2 acknowledged", len(ids))
	}

	// A restart on a full disk serves, and answers 503 the same. (Even
	// reads fail now: SQLite cannot create the WAL index a reader needs,
	// so /healthz is 503 too, as it is whenever its snapshot cannot be
	// built; discovery needs no storage.)
	stop()
	free = fill(t, disk)
	s, stop, logs = loggedServer(t, dir, clock)
	wantUnavailable(t, s.do("POST", "/v1/tasks", adminKey, big), "30")
	wantUnavailable(t, s.do("GET", "/v1/counts", reader, nil), "30")
	wantUnavailable(t, s.do("GET", "/healthz", "", nil), "30")
	s.must(200, "GET", "/v1/openapi.json", "", nil)
	stop()
	// What could not be written at shutdown is reported lost.
	if lines := logs.lines("counters lost: the final flush failed"); len(lines) != 1 {
		t.Errorf("final counter flush: %q", lines)
	}
	// A server that fills its disk and restarts on it finds room to open
	// the store (the closed store's WAL is gone) but none to write: it
	// serves with 503, and recovers once there is room.
	free()
	_, stop, _ = loggedServer(t, dir, clock)
	free = fill(t, disk)
	stop()
	s, stop, _ = loggedServer(t, dir, clock)
	wantUnavailable(t, s.do("POST", "/v1/tasks", adminKey, big), "30")
	free()
	s.enqueue("main", adminKey, map[string]any{"title": "after the restart"})
	stop()
	free = fill(t, disk)

	// A store that cannot even be created: discovery answers, the rest
	// is 503 unavailable.
	s, _ = serverAt(t, fresh, clock)
	wantUnavailable(t, s.do("GET", "/v1/me", adminKey, nil), "30")
	wantUnavailable(t, s.do("POST", "/v1/tasks", adminKey, map[string]any{"title": "x"}), "30")
	for _, p := range []string{"/v1/openapi.json", "/connect.json", "/llms.txt"} {
		s.must(200, "GET", p, "", nil)
	}
	free()
}

// A database locked past the busy timeout (another process holding the
// write lock) is 503 with a short Retry-After.
func TestLockedStoreIsUnavailable(t *testing.T) {
	if onPostgres {
		t.Skip("a lock on the SQLite file; on PostgreSQL --data holds no store")
	}
	t.Parallel()
	s := newTestServer(t)
	c, err := sqlite3.Open(s.dataFile())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Exec("BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	wantUnavailable(t, s.do("POST", "/v1/tasks", adminKey, map[string]any{"title": "locked out"}), "1")
	if err := c.Exec("ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	s.enqueue("main", adminKey, map[string]any{"title": "after"})
}
