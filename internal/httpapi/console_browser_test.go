package httpapi_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/tessera"
	"github.com/tessera-dev/tessera/internal/testbin"
)

// The console as an operator uses it: real headless Chromium, driven
// through the DevTools protocol by chromedp (the well-kept CDP driver for
// Go), against a running server. Every test watches for JavaScript
// dialogs and uncaught exceptions: a hostile title that ran as script
// would open one, a broken page would throw.

var consoleShots = flag.String("console-screenshots", filepath.Join(os.TempDir(), "tessera-console-screenshots"),
	"where the console browser tests save their screenshots")

// browser is one headless Chromium tab.
type browser struct {
	t   *testing.T
	ctx context.Context
	s   *testServer
	mu  sync.Mutex
	// dialogs and exceptions the page raised.
	dialogs, exceptions []string
}

// browseTimeout bounds a whole browser test: a page that never shows what
// a test waits for fails it instead of hanging it.
const browseTimeout = 30 * time.Second

func newBrowser(t *testing.T, s *testServer) *browser {
	t.Helper()
	testbin.Needs(t, "Chromium")
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("no %s: `make test` installs it (scripts/test-setup), or apt-get install chromium", chromiumPath)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("hide-scrollbars", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1360, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	b := &browser{t: t, ctx: ctx, s: s}
	// The first Run starts the browser, and lives as long as it: no
	// timeout on it (chromedp.Run's rule); each step gets one below.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	err := chromedp.Listen(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *page.EventJavascriptDialogOpening:
			b.mu.Lock()
			b.dialogs = append(b.dialogs, ev.Message)
			b.mu.Unlock()
			// A dialog blocks the page: dismiss it, off the event loop.
			go func() { _, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{}) }()
		case *runtime.EventExceptionThrown:
			b.mu.Lock()
			b.exceptions = append(b.exceptions, (&chromedp.ExceptionError{ExceptionDetails: ev.ExceptionDetails}).Error())
			b.mu.Unlock()
		}
	})
	if err != nil {
		t.Fatalf("listen to the tab: %v", err)
	}
	t.Cleanup(func() {
		b.mu.Lock()
		dialogs, exceptions := b.dialogs, b.exceptions
		b.mu.Unlock()
		if len(dialogs) > 0 {
			t.Errorf("the page opened dialogs: %q", dialogs)
		}
		if len(exceptions) > 0 {
			t.Errorf("the page threw: %q", exceptions)
		}
		cancelTab()
		cancelAlloc()
	})
	return b
}

// step runs one action with the test's bound on it.
func step[T any](b *browser, what string, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, browseTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.t.Fatalf("%s: %v\n%s", what, err, b.describe())
	}
	return v
}

// describe says what the page shows, for a failure's message, and keeps
// a screenshot of it.
func (b *browser) describe() string {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
	if err != nil {
		return "(the page cannot be read: " + err.Error() + ")"
	}
	if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil && os.MkdirAll(*consoleShots, 0o755) == nil {
		path := filepath.Join(*consoleShots, "failed-"+strings.ReplaceAll(b.t.Name(), "/", "-")+".png")
		if os.WriteFile(path, png, 0o644) == nil {
			text += "\n(screenshot: " + path + ")"
		}
	}
	return "the page: " + text
}

// run runs actions in the tab, in order, failing the test on an error.
func (b *browser) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	step(b, what, chromedp.Steps(actions...))
}

// login opens the console and pastes key.
func (b *browser) login(key string) {
	b.t.Helper()
	b.run("log in",
		chromedp.Navigate(b.s.URL+"/console"),
		chromedp.WaitVisible(chromedp.CSS(`input[name=key]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name=key]`), key),
		chromedp.Click(chromedp.CSS(`form.login button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`header.top .who`)),
		chromedp.WaitVisible(chromedp.CSS(`.live.on`)), // following the namespace's events
	)
}

// open navigates the console to a view (its hash) and waits for sel.
func (b *browser) open(hash, sel string) {
	b.t.Helper()
	b.run("open "+hash, chromedp.Navigate(b.s.URL+"/console"+hash), chromedp.WaitVisible(chromedp.CSS(sel)))
}

// visible waits until sel shows.
func (b *browser) visible(what, sel string) {
	b.t.Helper()
	b.run(what, chromedp.WaitVisible(chromedp.CSS(sel)))
}

// click clicks sel, then waits until then shows.
func (b *browser) click(what, sel, then string) {
	b.t.Helper()
	b.run(what, chromedp.Click(chromedp.CSS(sel)), chromedp.WaitVisible(chromedp.CSS(then)))
}

// shot saves a screenshot of the page as name.png and says where.
func (b *browser) shot(name string) {
	b.t.Helper()
	if err := os.MkdirAll(*consoleShots, 0o755); err != nil {
		b.t.Fatal(err)
	}
	b.run("settle", chromedp.Sleep(300*time.Millisecond)) // the row highlight's fade
	png := step(b, "screenshot "+name, chromedp.FullScreenshot(100))
	path := filepath.Join(*consoleShots, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s", path)
}

// text returns the visible text of the first element sel matches.
func (b *browser) text(sel string) string {
	b.t.Helper()
	return step(b, "read "+sel, chromedp.Text(chromedp.CSS(sel)))
}

// eval evaluates a JavaScript expression, awaiting a promise.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	return step(b, "evaluate "+expr, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
}

// seedConsole gives the console queues, tasks in every state and a record
// and blob written under a lease; it returns a dead task.
func seedConsole(s *testServer) tessera.Task {
	s.t.Helper()
	for i, title := range []string{"Summarize the Q3 incident reports", "Render map tiles for zoom 12", "Translate release notes to German",
		"Transcribe interview #4", "Index the support mailbox"} {
		queue := []string{"docs", "render", "docs", "audio", "mail"}[i]
		s.enqueue("main", adminKey, map[string]any{"title": title, "queue": queue, "public": true})
	}
	s.enqueue("main", adminKey, map[string]any{"title": "Re-run the nightly export", "queue": "render", "run_at": s.Clock.Now().Add(20 * time.Minute)})
	done := s.claim("main", adminKey, "docs")
	s.must(201, "PUT", "/v1/records/reports/q3-summary", adminKey, map[string]any{
		"value": map[string]any{"incidents": 7, "longest_outage_minutes": 42, "headline": "Fewer, shorter outages"}, "lease_token": done.Lease.Token})
	s.submit("main", adminKey, done, tessera.OutcomeSucceeded)
	s.claim("main", adminKey, "render") // left leased

	dead := s.enqueue("main", adminKey, map[string]any{"title": "Resize the product photos", "queue": "images", "max_attempts": 1,
		"brief": "Resize every photo in /incoming to 1200 px wide; keep the EXIF data."})
	c := s.claim("main", adminKey, "images")
	s.must(200, "POST", "/v1/claims/"+dead.ID+"/submit", adminKey, map[string]any{"lease_token": c.Lease.Token, "outcome": "failed",
		"error": "disk full: /var/cache/resize has 0 bytes free"})
	return s.task("main", adminKey, dead.ID)
}

// An operator opens the console with a key, finds a dead task, reads its
// error, presses retry, and sees it become ready through the live stream:
// the page changes the state when the stream's event says so.
func TestConsoleRetriesADeadTaskLive(t *testing.T) {
	s := newTestServer(t)
	dead := seedConsole(s)
	if dead.State != tessera.StateDead {
		t.Fatalf("seeded task is %s", dead.State)
	}
	b := newBrowser(t, s)
	b.login(adminKey)
	b.visible("the queues", `tr[data-queue="images"]`)
	b.shot("console-queues")

	b.open("#/ns/main/tasks?state=dead", `tr[data-task="`+dead.ID+`"]`)
	b.shot("console-tasks-dead")
	b.click("open the dead task", `tr[data-task="`+dead.ID+`"] a`, `#task-error`)
	if got := b.text(`#task-error`); !strings.Contains(got, "disk full: /var/cache/resize has 0 bytes free") {
		t.Fatalf("the dead task's error reads %q", got)
	}
	b.shot("console-task-dead")

	b.click("retry", `button[data-action="retry"]`, `#task-state[data-state="ready"][data-updated-by="event"]`)
	if got := s.task("main", adminKey, dead.ID); got.State != tessera.StateReady {
		t.Fatalf("after retry the task is %s", got.State)
	}
	b.shot("console-task-retried")

	// A change made elsewhere shows too: a worker claims it.
	s.claim("main", adminKey, "images")
	b.visible("claimed elsewhere", `#task-state[data-state="leased"][data-updated-by="event"]`)
}

// Bulk cancel: the filter selects a set, a dry run counts it, the
// operator confirms that count, and exactly that set is canceled.
func TestConsoleBulkCancelsAFilteredSet(t *testing.T) {
	s := newTestServer(t)
	var batch []string
	for i := range 5 {
		batch = append(batch, s.enqueue("main", adminKey, map[string]any{"title": "import batch 7 part " + string(rune('a'+i)), "queue": "imports"}).ID)
	}
	keep := s.enqueue("main", adminKey, map[string]any{"title": "import batch 8", "queue": "imports"})
	other := s.enqueue("main", adminKey, map[string]any{"title": "import batch 7 elsewhere", "queue": "exports"})

	b := newBrowser(t, s)
	b.login(adminKey)
	b.open("#/ns/main/tasks?queue=imports&title=BATCH%207", `tr[data-task="`+batch[0]+`"]`)
	b.click("count", `button[data-bulk="cancel"]`, `.confirm[data-count="5"]`)
	b.shot("console-bulk-confirm")
	b.click("confirm", `button[data-confirm="cancel"]`, `.notice`)
	if got := b.text(`.notice`); !strings.Contains(got, "Canceled 5 tasks.") {
		t.Fatalf("after the bulk cancel: %q", got)
	}
	for _, id := range batch {
		if got := s.task("main", adminKey, id); got.State != tessera.StateCanceled {
			t.Errorf("task %s of the set is %s", id, got.State)
		}
	}
	for _, id := range []string{keep.ID, other.ID} {
		if got := s.task("main", adminKey, id); got.State != tessera.StateReady {
			t.Errorf("task %s outside the set is %s", id, got.State)
		}
	}
	b.visible("the list shows it", `tr[data-task="`+batch[0]+`"] [data-state="canceled"]`)
	b.shot("console-bulk-done")
}

// A read-only key sees no action, and the server refuses one forged from
// the page anyway.
func TestConsoleReadOnlyKeySeesNoActions(t *testing.T) {
	s := newTestServer(t)
	dead := seedConsole(s)
	reader, _ := s.newKey("user", "namespace:main", "read")
	b := newBrowser(t, s)
	b.login(reader)
	b.visible("the queues", `tr[data-queue="images"]`)
	if buttons := eval[int](b, `document.querySelectorAll(".content button").length`); buttons != 0 {
		t.Fatalf("the queues show %d buttons to a read-only key", buttons)
	}
	b.open("#/ns/main/tasks", `tr[data-task="`+dead.ID+`"]`)
	if buttons := eval[int](b, `document.querySelectorAll("[data-bulk], td button").length`); buttons != 0 {
		t.Fatalf("the task list shows %d buttons to a read-only key", buttons)
	}
	b.open("#/ns/main/task/"+dead.ID, `#task-error`)
	if buttons := eval[int](b, `document.querySelectorAll("button[data-action]").length`); buttons != 0 {
		t.Fatalf("the task page shows %d action buttons to a read-only key", buttons)
	}
	b.shot("console-read-only")

	status := eval[int](b, `fetch("/v1/tasks/`+dead.ID+`/retry", {method: "POST", headers: {Authorization: "Bearer " + sessionStorage.getItem("tessera.key")}}).then(r => r.status)`)
	if status != 403 {
		t.Fatalf("a retry forged with the read-only key: %d, want 403", status)
	}
	if got := s.task("main", adminKey, dead.ID); got.State != tessera.StateDead {
		t.Fatalf("after the forged retry the task is %s", got.State)
	}
}

// Hostile titles and record values render as text, on the console and on
// the board: no element injected, no dialog, and a bidi override shown,
// not obeyed. The board then follows the public stream live.
func TestHostileTextRendersAsText(t *testing.T) {
	s := newTestServer(t)
	const title = `<img src=x onerror=alert(1)><script>alert(2)</script>` + "\u202e" + `gnp.exe`
	const value = `<script>alert(3)</script></pre><img src=y onerror=alert(4)>`
	s.must(200, "PUT", "/v1/buckets/results", adminKey, map[string]any{"public": true})
	task := s.enqueue("main", adminKey, map[string]any{"title": title, "queue": "hostile", "public": true})
	c := s.claim("main", adminKey, "hostile")
	s.must(201, "PUT", "/v1/records/results/hostile", adminKey, map[string]any{"value": map[string]any{"html": value, "name": "\u202eexe.txt"}, "lease_token": c.Lease.Token})

	b := newBrowser(t, s)
	b.login(adminKey)
	b.open("#/ns/main/task/"+task.ID, `h1 bdi.title`)
	b.click("show the record", `li button`, `pre.record-value`)
	checkInert := func(where string) {
		t.Helper()
		imgs, scripts := eval[int](b, `document.querySelectorAll("img").length`), eval[int](b, `document.scripts.length`)
		if imgs != 0 || scripts != 1 {
			t.Fatalf("%s: %d img and %d script elements, want 0 and 1 (the page's own)", where, imgs, scripts)
		}
	}
	checkInert("console")
	shownTitle := eval[string](b, `document.querySelector("h1 bdi.title").textContent`)
	bidi := eval[string](b, `document.querySelector("h1 bdi.title .bidi").textContent`)
	record := eval[string](b, `document.querySelector("pre.record-value").textContent`)
	if shownTitle != `<img src=x onerror=alert(1)><script>alert(2)</script>\u202Egnp.exe` || bidi != `\u202E` {
		t.Fatalf("the title shows as %q (bidi control as %q)", shownTitle, bidi)
	}
	if !strings.Contains(record, `"html": "<script>alert(3)</script></pre><img src=y onerror=alert(4)>"`) || !strings.Contains(record, `\u202Eexe.txt`) {
		t.Fatalf("the record value shows as %q", record)
	}
	b.shot("console-hostile")

	// The board: keyless, the same text as text.
	b.run("the board", chromedp.Navigate(s.URL+"/board"), chromedp.WaitVisible(chromedp.CSS(`li[data-task="`+task.ID+`"]`)))
	checkInert("board")
	shownTitle = eval[string](b, `document.querySelector('li[data-task="`+task.ID+`"] bdi').textContent`)
	record = eval[string](b, `document.querySelector(".record pre").textContent`)
	if shownTitle != `<img src=x onerror=alert(1)><script>alert(2)</script>\u202Egnp.exe` {
		t.Fatalf("the board's title shows as %q", shownTitle)
	}
	if !strings.Contains(record, `"html": "<script>alert(3)</script></pre><img src=y onerror=alert(4)>"`) || strings.Contains(record, `\u003c`) {
		t.Fatalf("the board's record value shows as %q", record)
	}
	step(b, "the board follows the stream", chromedp.Poll[bool](`document.getElementById("freshness").textContent === "live"`))
	b.shot("board-hostile")
	later := s.enqueue("main", adminKey, map[string]any{"title": "Arrived while the board was open", "queue": "hostile", "public": true})
	b.visible("the new task appears", `li[data-task="`+later.ID+`"]`)
	checkInert("board after an update")
}

// An admin key manages principals and keys from the console: it makes a
// principal, a key for it (its secret shown once), and revokes the key;
// the namespace's audit trail shows what happened.
func TestConsoleAdminManagesKeys(t *testing.T) {
	s := newTestServer(t)
	seedConsole(s)
	b := newBrowser(t, s)
	b.login(adminKey)
	b.open("#/admin", `form input[name=display_name]`)
	b.run("make a principal",
		chromedp.SendKeys(chromedp.CSS(`input[name=display_name]`), "nightly-worker"),
		chromedp.Click(chromedp.CSS(`form:first-of-type button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`.notice`)))
	if got := b.text(`.notice`); !strings.Contains(got, "Principal nightly-worker made") {
		t.Fatalf("after making a principal: %q", got)
	}
	b.run("make a key for it",
		chromedp.SetValue(chromedp.CSS(`input[name=scopes]`), "namespace:main read claim"),
		chromedp.Click(chromedp.CSS(`form:nth-of-type(2) button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`.secret code`)))
	secret := b.text(`.secret code`)
	if !strings.HasPrefix(secret, "tsk_") {
		t.Fatalf("the new key shows as %q", secret)
	}
	var worker, admin struct {
		Principal struct {
			ID          string `json:"id"`
			DisplayName string `json:"display_name"`
		} `json:"principal"`
	}
	s.must(200, "GET", "/v1/me", secret, nil).decode(t, &worker)
	s.must(200, "GET", "/v1/me", adminKey, nil).decode(t, &admin)
	b.shot("console-admin")
	id := keyID(t, secret)
	// Principals show by display name, the id on hover; times by how
	// long ago, their one stamp (UTC, to the second) on hover.
	owner := `tr[data-key="` + id + `"] td:nth-child(2) .who`
	if got, title := b.text(owner), eval[string](b, `document.querySelector('`+owner+`').title`); got != worker.Principal.DisplayName || title != worker.Principal.ID {
		t.Fatalf("the new key's principal shows as %q (hover %q), want %q (hover %s)", got, title, worker.Principal.DisplayName, worker.Principal.ID)
	}
	stamp := regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$`)
	made := `tr[data-key="` + id + `"] td:nth-child(4) time`
	if got, title := b.text(made), eval[string](b, `document.querySelector('`+made+`').title`); !regexp.MustCompile(`^(just now|\d+ s ago)$`).MatchString(got) || !stamp.MatchString(title) {
		t.Fatalf("the new key's time shows as %q (hover %q), want seconds ago (hover a UTC stamp)", got, title)
	}
	b.click("revoke it", `tr[data-key="`+id+`"] button.danger`, `tr[data-key="`+id+`"] .meta`)
	if got := b.text(`tr[data-key="` + id + `"] .meta`); !strings.HasPrefix(got, "revoked") {
		t.Fatalf("after revoking, the key's row says %q", got)
	}
	if r := s.do("GET", "/v1/me", secret, nil); r.Status != 401 {
		t.Fatalf("the revoked key %s still answers %d", id, r.Status)
	}
	b.open("#/ns/main/audit", `td .who`)
	if got, title := b.text(`tbody td .who`), eval[string](b, `document.querySelector('tbody td .who').title`); got != admin.Principal.DisplayName || title != admin.Principal.ID {
		t.Fatalf("the audit's principal shows as %q (hover %q), want %q (hover %s)", got, title, admin.Principal.DisplayName, admin.Principal.ID)
	}
	if n := eval[int](b, `[...document.querySelectorAll('tbody time')].filter((e) => !/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/.test(e.title)).length`); n != 0 {
		t.Fatalf("%d audit times have no UTC stamp on hover", n)
	}
	b.shot("console-audit")
}

// A task waiting on a parent shows what it waits on, linked, that its
// claims carry the parent's result, and its unique key; the parent shows
// the checkpoint its run left; the child turns ready through the live
// stream when the parent succeeds.
func TestConsoleShowsDependenciesAndCheckpoints(t *testing.T) {
	s := newTestServer(t)
	parent := s.enqueue("main", adminKey, map[string]any{"title": "Fetch the corpus", "queue": "etl"})
	child := s.enqueue("main", adminKey, map[string]any{"title": "Index the corpus", "queue": "etl", "after": []string{parent.ID},
		"parent_results": true, "unique_key": "corpus-index"})
	c := s.claimOf(t, "etl", parent.ID)
	s.must(200, "POST", "/v1/claims/"+parent.ID+"/heartbeat", adminKey, map[string]any{"lease_token": c.Lease.Token,
		"checkpoint": map[string]any{"fetched_pages": 1200}})

	b := newBrowser(t, s)
	b.login(adminKey)
	b.open("#/ns/main/task/"+child.ID, `#task-state[data-state="waiting"]`)
	if got := b.text(`#task-next`); got != "waiting on 1 parent task(s) to finish" {
		t.Fatalf("the waiting task's next step reads %q", got)
	}
	if got := eval[string](b, `document.querySelector("#task-after a").getAttribute("href")`); got != "#/ns/main/task/"+parent.ID {
		t.Fatalf("the parent's link is %q", got)
	}
	if got := b.text(`#task-after`); !strings.HasSuffix(got, "(canceled if one fails; its claims carry their results)") {
		t.Fatalf("the child's after reads %q", got)
	}
	if got := b.text(`#task-unique-key`); got != "corpus-index" {
		t.Fatalf("the child's unique key reads %q", got)
	}
	b.shot("console-task-waiting")

	b.open("#/ns/main/task/"+parent.ID, `#task-checkpoint`)
	if got := b.text(`#task-checkpoint`); !strings.Contains(got, `"fetched_pages": 1200`) {
		t.Fatalf("the parent's checkpoint reads %q", got)
	}
	b.open("#/ns/main/task/"+child.ID, `#task-state[data-state="waiting"]`)
	s.submit("main", adminKey, c, tessera.OutcomeSucceeded)
	b.visible("the child turns ready", `#task-state[data-state="ready"][data-updated-by="event"]`)
}

// seedFleet gives queue "render" a fleet: three tasks of group acme that
// require a GPU nobody has, globex's tasks (first in claim order) held by
// a CPU worker up to the queue's cap of 2, and a group whose name carries
// a bidi override. The worker claims once, ten minutes pass, and it
// claims again: the lanes it can take are matched, acme's has waited
// unmatched for ten minutes.
func seedFleet(s *testServer) {
	s.t.Helper()
	s.must(200, "PUT", "/v1/queues/render/settings", adminKey, map[string]any{"group_max_running": 2})
	for i := range 3 {
		s.enqueue("main", adminKey, map[string]any{"queue": "render", "group": "acme", "requires": []string{"gpu:a100"},
			"title": "Render acme frame " + strconv.Itoa(i)})
		s.enqueue("main", adminKey, map[string]any{"queue": "render", "group": "globex", "priority": 10,
			"title": "Render globex frame " + strconv.Itoa(i)})
	}
	s.enqueue("main", adminKey, map[string]any{"queue": "render", "group": "initech\u202egnp.exe", "title": "Render initech frame"})
	claimCPU := func() {
		s.t.Helper()
		var c claimed
		s.must(200, "POST", "/v1/claims", adminKey, map[string]any{"queue": "render", "capabilities": []string{"cpu"}, "lease_seconds": 3600}).decode(s.t, &c)
		if c.Task.Group != "globex" {
			s.t.Fatalf("the CPU worker was granted a task of group %q, want globex", c.Task.Group)
		}
	}
	claimCPU()
	s.Clock.Advance(10 * time.Minute)
	claimCPU()
}

// A queue's fleet on the console: its lanes with their ready counts, the
// lane no claimant seen could take marked unmatched for as long as it has
// been, its groups' live leases against their cap, untrusted group names
// shown as text with bidi controls marked; and it follows new work live.
func TestConsoleShowsAQueuesFleet(t *testing.T) {
	s := newTestServer(t)
	seedFleet(s)
	// acme cools down for half an hour; initech caps itself at 1.
	s.must(200, "PUT", "/v1/queues/render/groups", adminKey, map[string]any{"group": "acme", "cooldown_until": s.Clock.Now().Add(30 * time.Minute)})
	s.must(200, "PUT", "/v1/queues/render/groups", adminKey, map[string]any{"group": "initech\u202egnp.exe", "max_running": 1})
	var fleet core.Fleet
	s.must(200, "GET", "/v1/queues/render/fleet", adminKey, nil).decode(t, &fleet)

	b := newBrowser(t, s)
	b.login(adminKey)
	b.visible("the fleet of render", `section[data-fleet="render"] tr[data-lane="acme|gpu:a100"]`)
	acme := `section[data-fleet="render"] tr[data-lane="acme|gpu:a100"]`
	if got := b.text(acme + ` .lane-ready`); got != "3" {
		t.Errorf("acme's GPU lane shows %q ready, want 3", got)
	}
	if got := b.text(`section[data-fleet="render"] tr[data-group="globex"] .group-running`); got != "2 / 2" {
		t.Errorf("globex shows %q running / cap, want 2 / 2", got)
	}
	if got := b.text(`section[data-fleet="render"] tr[data-lane="globex|"] .lane-ready`); got != "1" {
		t.Errorf("globex's lane shows %q ready, want 1", got)
	}
	if got := b.text(`section[data-fleet="render"] .setting-cap`); got != "at most 2" {
		t.Errorf("the queue's cap reads %q", got)
	}
	if got := b.text(`section[data-fleet="render"] tr[data-group="acme"] .group-cooldown`); !strings.HasSuffix(got, "(in 30 min)") {
		t.Errorf("acme's cooldown reads %q, want it to end in 30 min", got)
	}
	if got := b.text(`section[data-fleet="render"] tr[data-group="globex"] .group-cooldown`); got != "—" {
		t.Errorf("globex's cooldown reads %q", got)
	}
	if got := eval[string](b, `document.querySelector('section[data-fleet="render"] tr[data-group="initech\u202egnp.exe"] .group-running').textContent`); got != "0 / 1" {
		t.Errorf("initech shows %q running / cap, want its own cap: 0 / 1", got)
	}
	hostile := eval[string](b, `document.querySelector('section[data-fleet="render"] tr[data-group="initech\u202egnp.exe"] bdi.group').textContent`)
	if hostile != `initech\u202Egnp.exe` {
		t.Errorf("the hostile group name shows as %q", hostile)
	}
	if n := eval[int](b, `document.querySelectorAll('section[data-fleet="render"] .unmatched-mark').length`); n != 1 {
		t.Errorf("%d lanes marked unmatched, want only acme's GPU lane", n)
	}
	// The marker needs the fleet read's own clock (its time, the ages it
	// derives from it): say so apart from what the page shows.
	if fleet.Time.IsZero() {
		t.Errorf("server: GET /v1/queues/render/fleet answers time %s: the fleet view is computed at the zero time, so no lane has an oldest ready age or is ever unmatched", fleet.Time.Format(time.RFC3339))
	}
	marker := eval[string](b, `document.querySelector('`+acme+` .unmatched-mark')?.textContent ?? "(none)"`)
	if marker != "ready, unmatched for 10 minutes" {
		t.Errorf("acme's GPU lane's marker reads %q, want \"ready, unmatched for 10 minutes\"", marker)
	}
	b.shot("console-fleet")

	if got := b.text(`section[data-fleet="render"] tr[data-lane="globex|"] .lane-match`); got != "a claimant seen can take them" {
		t.Errorf("globex's lane, which the CPU worker took from, reads %q", got)
	}

	// New work shows as it commits; a lane younger than the 5 minutes
	// that judge it, no claimant seen for it, is not judged yet.
	s.enqueue("main", adminKey, map[string]any{"queue": "render", "group": "acme", "requires": []string{"gpu:a100"}, "title": "Render acme frame 3"})
	step(b, "the new task counts", chromedp.Poll[bool](`document.querySelector('`+acme+` .lane-ready').textContent === "4"`))
	s.enqueue("main", adminKey, map[string]any{"queue": "render", "group": "hooli", "requires": []string{"tpu:v5"}, "title": "Render hooli frame"})
	hooli := `section[data-fleet="render"] tr[data-lane="hooli|tpu:v5"]`
	b.visible("the new lane", hooli)
	if got := b.text(hooli + ` .lane-match`); got != "not judged yet" {
		t.Errorf("a new lane no claimant seen covers reads %q, want \"not judged yet\"", got)
	}
	b.shot("console-fleet-new-lane")
}

// A key that may enqueue sets the queue's cap from the fleet panel; a
// read-only key sees the panel and no form.
func TestConsoleSetsFleetSettings(t *testing.T) {
	s := newTestServer(t)
	seedFleet(s)
	reader, _ := s.newKey("user", "namespace:main", "read")
	b := newBrowser(t, s)
	b.login(reader)
	b.visible("the fleet of render", `section[data-fleet="render"] tr[data-group="globex"]`)
	if n := eval[int](b, `document.querySelectorAll("form.fleet-form").length`); n != 0 {
		t.Fatalf("a read-only key sees %d settings forms", n)
	}

	b = newBrowser(t, s)
	b.login(adminKey)
	b.run("set the cap to 3 and a rate",
		chromedp.WaitVisible(chromedp.CSS(`form.fleet-form`)),
		chromedp.SetValue(chromedp.CSS(`form.fleet-form input[name=group_max_running]`), "3"),
		chromedp.SetValue(chromedp.CSS(`form.fleet-form input[name=per_second]`), "5"),
		chromedp.Click(chromedp.CSS(`form.fleet-form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`.notice`)))
	step(b, "the panel shows it", chromedp.Poll[bool](`document.querySelector('section[data-fleet="render"] .setting-cap')?.textContent === "at most 3"`))
	if got := b.text(`section[data-fleet="render"] .setting-rate`); got != "5 a second, bursts of 5" {
		t.Errorf("the queue's rate reads %q", got)
	}
	if got := b.text(`section[data-fleet="render"] tr[data-group="globex"] .group-running`); got != "2 / 3" {
		t.Errorf("globex shows %q running / cap, want 2 / 3", got)
	}
	var q core.QueueSettings
	s.must(200, "GET", "/v1/queues/render/fleet", adminKey, nil).decode(t, &q)
	if q.GroupMaxRunning != 3 || q.Rate == nil || q.Rate.PerSecond != 5 || q.Rate.Burst != 5 {
		t.Errorf("the server's settings after the form: %+v (rate %+v)", q, q.Rate)
	}
	b.shot("console-fleet-settings")
}

// The queue table fits the window at 1280 and 1440 px: every action of a
// queue stays on screen (issue 42 found "Purge finished" cut off at
// both), and a table wider than a window scrolls in its box instead.
func TestConsoleQueueTableFitsTheWindow(t *testing.T) {
	s := newTestServer(t)
	seedFleet(s)
	s.enqueue("main", adminKey, map[string]any{"queue": "a-queue-with-a-rather-long-name-of-its-own", "title": "long"})
	b := newBrowser(t, s)
	b.login(adminKey)
	for _, width := range []int64{1280, 1440} {
		b.run(fmt.Sprintf("a window %d px wide", width), chromedp.EmulateViewport(width, 900))
		b.visible("the queue table", `table.queues button`)
		// Every button's right edge within the page's width, and the page
		// itself no wider than the window.
		outside := eval[int](b, `[...document.querySelectorAll("table.queues button")].filter((e) => e.getBoundingClientRect().right > document.documentElement.clientWidth).length`)
		if outside != 0 {
			t.Errorf("at %d px, %d queue actions end outside the window", width, outside)
		}
		if wide := eval[bool](b, `document.documentElement.scrollWidth > document.documentElement.clientWidth`); wide {
			t.Errorf("at %d px the page is wider than the window", width)
		}
		b.shot(fmt.Sprintf("console-queues-%d", width))
	}
}
