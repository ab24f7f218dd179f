package httpapi_test

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/tessera"
	"github.com/tessera-dev/tessera/internal/testbin"
)

// chromiumPath is where `apt-get install chromium` puts the browser; `make test`
// installs it when missing.
const chromiumPath = "/usr/bin/chromium"

var boardScreenshot = flag.String("board-screenshot", "",
	"also save a PNG screenshot of the board rendered by headless Chromium to this path (scripts/board-screenshot.sh)")

// chromium runs headless Chromium with args and returns its standard output.
func chromium(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, chromiumPath, append(base, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return string(out)
}

// seedBoard gives the board something to show in every section: tasks in
// several states and queues, and a public bucket with two record heads.
func seedBoard(s *testServer) {
	s.t.Helper()
	for _, task := range []map[string]any{
		{"title": "Summarize the Q3 incident reports", "queue": "docs", "priority": 5},
		{"title": "Render map tiles for zoom 12", "queue": "render"},
		{"title": "Transcribe interview #4", "queue": "audio", "run_at": s.Clock.Now().Add(20 * time.Minute)},
		{"title": "Translate release notes to German", "queue": "docs"},
	} {
		task["public"] = true
		s.enqueue("main", adminKey, task)
	}
	s.enqueue("main", adminKey, map[string]any{"title": "private: rotate credentials"})
	c := s.claim("main", adminKey, "render")
	s.must(200, "PUT", "/v1/buckets/results", adminKey, map[string]any{"public": true})
	s.must(201, "PUT", "/v1/records/results/map-tiles-z12", adminKey, map[string]any{
		"value":       map[string]any{"status": "all tiles rendered", "tiles": 4096, "bounds": []float64{52.3, 13.1, 52.7, 13.8}},
		"lease_token": c.Lease.Token})
	s.must(201, "PUT", "/v1/records/results/q3-summary", adminKey, map[string]any{
		"value": map[string]any{"incidents": 7, "longest_outage_minutes": 42, "headline": "Fewer, shorter outages"}})
	s.submit("main", adminKey, c, tessera.OutcomeSucceeded)
	s.claim("main", adminKey, "docs") // the priority-5 task, left leased
}

// The board as a person sees it: real headless Chromium loads /board from
// the running server and its DOM holds a public task and a public record
// head's value, and nothing private.
func TestBoardRenderedByChromium(t *testing.T) {
	testbin.Needs(t, "Chromium")
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("no %s: `make test` installs it (scripts/test-setup), or apt-get install chromium", chromiumPath)
	}
	s := newTestServer(t)
	seedBoard(s)

	dom := chromium(t, "--dump-dom", s.URL+"/board")
	for _, want := range []string{"Summarize the Q3 incident reports", "Render map tiles for zoom 12",
		"map-tiles-z12", `"status": "all tiles rendered"`, "Fewer, shorter outages", `http-equiv="refresh"`} {
		if !strings.Contains(dom, want) {
			t.Errorf("the rendered board lacks %q:\n%s", want, dom)
		}
	}
	if strings.Contains(dom, "rotate credentials") {
		t.Errorf("the rendered board shows a private task")
	}

	if *boardScreenshot != "" {
		chromium(t, "--hide-scrollbars", "--window-size=1280,1900", "--screenshot="+*boardScreenshot, s.URL+"/board")
		if fi, err := os.Stat(*boardScreenshot); err != nil || fi.Size() == 0 {
			t.Fatalf("no screenshot at %s: %v", *boardScreenshot, err)
		}
		t.Logf("board screenshot: %s", *boardScreenshot)
	}
}
