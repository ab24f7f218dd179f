package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/auth"
)

// These tests run the real binary: durability across kill -9, graceful
// shutdown on SIGTERM, and the offline admin tool (SPEC §2, §15).

const crashAdminKey = "tsk_crashtest_abcdefghijklmnopqrstuvwxyz0123"

// buildTessera builds the binary into a temporary directory.
func buildTessera(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the tessera binary")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build the binary with: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "tessera")
	out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// cleanEnv is the test's environment without any TESSERA_* variable, plus
// extra, so the binary sees only what a test gives it.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TESSERA_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// freeAddr finds a loopback port nobody listens on. The port could be
// taken again before the server binds it; on loopback in a test that is
// rare enough.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// waitForCount waits until count reaches want, failing the test if it has
// not within the given time.
func waitForCount(t *testing.T, what string, want int, within time.Duration, count func() int) {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(5 * time.Millisecond) {
		n := count()
		if n >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d %s in %s", n, want, what, within)
		}
	}
}

// lockedBuffer collects a child's stderr while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// server is a running `tessera serve`.
type server struct {
	t      *testing.T
	cmd    *exec.Cmd
	url    string
	stderr *lockedBuffer
	exited chan struct{} // closed when the process has been waited for
}

// startServer runs `tessera serve` on dataDir and waits until it accepts
// connections and has logged that it serves (the line comes just after
// the listen, so a test reading it must not race it).
func startServer(t *testing.T, bin, dataDir string, env ...string) *server {
	t.Helper()
	addr := freeAddr(t)
	s := &server{t: t, url: "http://" + addr, stderr: &lockedBuffer{}, exited: make(chan struct{})}
	s.cmd = exec.Command(bin, "serve", "--data", dataDir, "--addr", addr)
	s.cmd.Env = cleanEnv(env...)
	s.cmd.Stderr = s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		<-s.exited
		if t.Failed() {
			t.Logf("server stderr:\n%s", s.stderr.String())
		}
	})
	// The server listens before it opens its store and says it serves
	// once it does: the line is the signal, and no probe connection is
	// left to take one of a test's slots.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if strings.Contains(s.stderr.String(), "tessera serving") {
			return s
		}
		select {
		case <-s.exited:
			t.Fatalf("server exited before listening: %v\n%s", s.cmd.ProcessState, s.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("server not listening on %s after 30 s:\n%s", addr, s.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// wantExitZero fails the test unless the server exits 0 within d (of a
// SIGTERM the test sent); why says what might have held it.
func (s *server) wantExitZero(d time.Duration, why string) {
	s.t.Helper()
	select {
	case <-s.exited:
	case <-time.After(d):
		s.t.Fatalf("the server did not exit within %s of SIGTERM (%s):\n%s", d, why, s.stderr.String())
	}
	if code := s.cmd.ProcessState.ExitCode(); code != 0 {
		s.t.Fatalf("exit code %d after SIGTERM, want 0:\n%s", code, s.stderr.String())
	}
}

// kill ends the server with SIGKILL: no drain, no close, no checkpoint.
func (s *server) kill() {
	s.t.Helper()
	if err := s.cmd.Process.Kill(); err != nil {
		s.t.Fatal(err)
	}
	<-s.exited
}

// call sends a JSON request and returns the status and body.
func (s *server) call(method, path, key string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, b, err
}

// must sends a request, fails the test unless it answers want, and decodes
// the body into out (when out is not nil).
func (s *server) must(want int, method, path, key string, body, out any) {
	s.t.Helper()
	status, b, err := s.call(method, path, key, body)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	if status != want {
		s.t.Fatalf("%s %s: status %d, want %d: %s", method, path, status, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			s.t.Fatalf("%s %s: decode %s: %v", method, path, b, err)
		}
	}
}

// wireTask is the part of a task these tests compare.
type wireTask struct {
	ID       string `json:"id"`
	Title    string `json:"title"`
	State    string `json:"state"`
	Attempts int    `json:"attempts"`
}

// allTasks pages through GET /v1/tasks.
func (s *server) allTasks(key string) map[string]wireTask {
	s.t.Helper()
	out := map[string]wireTask{}
	cursor := ""
	for range 1000 {
		var page struct {
			Tasks      []wireTask `json:"tasks"`
			NextCursor string     `json:"next_cursor"`
		}
		s.must(200, "GET", "/v1/tasks?limit=200&cursor="+cursor, key, nil, &page)
		for _, task := range page.Tasks {
			if _, dup := out[task.ID]; dup {
				s.t.Fatalf("task %s listed twice", task.ID)
			}
			out[task.ID] = task
		}
		if page.NextCursor == "" {
			return out
		}
		cursor = page.NextCursor
	}
	s.t.Fatal("task listing never ended")
	return nil
}

// §2 Durability: an acknowledged write survives kill -9 of the server.
func TestKill9KeepsAcknowledgedWrites(t *testing.T) {
	bin := buildTessera(t)
	dir := t.TempDir()
	srv := startServer(t, bin, dir, "TESSERA_ADMIN_KEY="+crashAdminKey)

	// acked is every task whose write the server acknowledged, with the
	// state the acknowledgement reported.
	acked := map[string]wireTask{}
	var mu sync.Mutex
	ack := func(w wireTask) {
		mu.Lock()
		acked[w.ID] = w
		mu.Unlock()
	}
	for i := range 100 {
		var w wireTask
		srv.must(201, "POST", "/v1/tasks", crashAdminKey, map[string]any{"title": fmt.Sprintf("task %d", i)}, &w)
		ack(w)
	}

	type lease struct {
		Lease struct {
			TaskID string `json:"task_id"`
			Token  string `json:"token"`
		} `json:"lease"`
		Task wireTask `json:"task"`
	}
	var held []lease
	for i := range 30 {
		var c lease
		srv.must(200, "POST", "/v1/claims", crashAdminKey, map[string]any{"queue": "default"}, &c)
		ack(c.Task)
		switch {
		case i < 20:
			var done wireTask
			srv.must(200, "POST", "/v1/claims/"+c.Lease.TaskID+"/submit", crashAdminKey,
				map[string]any{"lease_token": c.Lease.Token, "outcome": "succeeded"}, &done)
			ack(done)
		case i < 25:
			var failed wireTask
			srv.must(200, "POST", "/v1/claims/"+c.Lease.TaskID+"/submit", crashAdminKey,
				map[string]any{"lease_token": c.Lease.Token, "outcome": "failed", "error": "try again"}, &failed)
			ack(failed)
		default:
			held = append(held, c)
		}
	}

	// Writers keep enqueueing while the process is killed, so the kill
	// lands among writes in flight. A write in flight may or may not
	// survive; an acknowledged one must.
	const writers = 2
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var extra sync.Map
	for w := range writers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				title := fmt.Sprintf("writer %d task %d", w, i)
				status, b, err := srv.call("POST", "/v1/tasks", crashAdminKey, map[string]any{"title": title})
				if err != nil {
					return // the server is gone
				}
				var got wireTask
				if status == 201 && json.Unmarshal(b, &got) == nil {
					ack(got)
					extra.Store(got.ID, true)
				}
			}
		})
	}
	waitForCount(t, "enqueues acknowledged to the writers", 20, 30*time.Second, func() int {
		n := 0
		extra.Range(func(any, any) bool { n++; return true })
		return n
	})
	srv.kill()
	close(stop)
	wg.Wait()

	srv = startServer(t, bin, dir, "TESSERA_ADMIN_KEY="+crashAdminKey)
	got := srv.allTasks(crashAdminKey)
	for id, want := range acked {
		have, ok := got[id]
		if !ok {
			t.Errorf("acknowledged task %s (%s, %s) is gone after kill -9", id, want.Title, want.State)
			continue
		}
		if have.Title != want.Title || have.Attempts != want.Attempts {
			t.Errorf("task %s after kill -9: %+v, acknowledged as %+v", id, have, want)
		}
		wantState := want.State
		if wantState == "scheduled" && have.State == "ready" {
			wantState = "ready" // its backoff ran out while we restarted
		}
		if have.State != wantState {
			t.Errorf("task %s after kill -9 is %s, acknowledged as %s", id, have.State, want.State)
		}
	}
	// At most the writes in flight at the kill were kept unacknowledged.
	if len(got) > len(acked)+writers {
		t.Errorf("%d tasks after restart, %d acknowledged and %d at most in flight", len(got), len(acked), writers)
	}
	if len(acked) < 120 {
		t.Fatalf("only %d acknowledged tasks: the test did not exercise enough", len(acked))
	}

	// A lease granted before the crash is still the task's live lease.
	var done wireTask
	srv.must(200, "POST", "/v1/claims/"+held[0].Lease.TaskID+"/submit", crashAdminKey,
		map[string]any{"lease_token": held[0].Lease.Token, "outcome": "succeeded"}, &done)
	if done.State != "succeeded" {
		t.Errorf("submit after restart: state %s", done.State)
	}
}

// §2 Graceful shutdown: SIGTERM stops accepting, ends long-polls and
// drains in-flight requests, then the process exits 0.
func TestSIGTERMEndsLongPollAndExitsZero(t *testing.T) {
	bin := buildTessera(t)
	srv := startServer(t, bin, t.TempDir(), "TESSERA_ADMIN_KEY="+crashAdminKey)

	type result struct {
		status int
		header http.Header
		err    error
	}
	results := make(chan result, 1)
	sent := make(chan struct{})
	go func() {
		trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { close(sent) }}
		ctx := httptrace.WithClientTrace(context.Background(), trace)
		req, err := http.NewRequestWithContext(ctx, "POST", srv.url+"/v1/claims",
			strings.NewReader(`{"queue":"idle","wait_seconds":20}`))
		if err != nil {
			results <- result{err: err}
			return
		}
		req.Header.Set("Authorization", "Bearer "+crashAdminKey)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			results <- result{err: err}
			return
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		results <- result{status: res.StatusCode, header: res.Header}
	}()
	select {
	case <-sent:
	case r := <-results:
		t.Fatalf("the long-poll ended before it was sent: %+v", r)
	}
	// Give the server a moment to start waiting on the claim; the test
	// holds either way, since a claim that arrives while draining is
	// answered the same.
	time.Sleep(300 * time.Millisecond)
	select {
	case r := <-results:
		t.Fatalf("the long-poll with wait_seconds=20 answered before SIGTERM: %+v", r)
	default:
	}

	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The bound is generous: it is about the long-poll not holding the
	// shutdown for its 20 s, not about speed.
	srv.wantExitZero(15*time.Second, "a 20 s long-poll was in flight")
	select {
	case r := <-results:
		if r.err != nil {
			t.Fatalf("the in-flight long-poll was cut off instead of answered: %v", r.err)
		}
		if r.status != http.StatusNoContent || r.header.Get("Retry-After") == "" {
			t.Fatalf("the in-flight long-poll answered %d (Retry-After %q), want 204 with Retry-After", r.status, r.header.Get("Retry-After"))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the server exited but the long-poll has no answer")
	}
	if !strings.Contains(srv.stderr.String(), "tessera stopped") {
		t.Errorf("no orderly stop in the log:\n%s", srv.stderr.String())
	}
}

// createKey runs `tessera admin create-key --data dir` and returns the key
// it printed.
func createKey(t *testing.T, bin, dir string, env ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(bin, "admin", "create-key", "--data", dir)
	cmd.Env = cleanEnv(env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%w: %s", err, stderr.String())
	}
	return strings.TrimSpace(stdout.String()), nil
}

// README: `tessera admin create-key --data DIR` makes another admin key
// offline that then works against a server on that directory; on a
// directory that holds no store yet it makes none, and says so.
func TestAdminCreateKeyAuthenticates(t *testing.T) {
	bin := buildTessera(t)
	dir := t.TempDir()

	if key, err := createKey(t, bin, dir); err == nil || !strings.Contains(err.Error(), "no store in") {
		t.Fatalf("create-key on an empty directory: %q, %v; want a refusal naming it", key, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("a refused create-key left %d files in the directory", len(entries))
	}
	first := startServer(t, bin, dir)
	first.kill()

	offline, err := createKey(t, bin, dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := auth.ParseKey(offline); err != nil {
		t.Fatalf("create-key printed %q, not a key: %v", offline, err)
	}

	// No TESSERA_ADMIN_KEY: the store already has principals, so the
	// server creates nothing and the offline key gets in.
	srv := startServer(t, bin, dir)
	if strings.Contains(srv.stderr.String(), "first admin key") {
		t.Errorf("the server bootstrapped another admin key over existing ones")
	}
	var me struct {
		Key struct {
			ID     string   `json:"id"`
			Scopes []string `json:"scopes"`
		} `json:"key"`
	}
	srv.must(200, "GET", "/v1/me", offline, nil, &me)
	srv.must(200, "GET", "/v1/admin/namespaces", offline, nil, nil)
	id, _, _ := auth.ParseKey(offline)
	srv.must(401, "GET", "/v1/me", "tsk_"+id+"_"+strings.Repeat("X", 40), nil, nil)

	// While the server runs, the tool can still add a key to its file.
	live, err := createKey(t, bin, dir)
	if err != nil {
		t.Fatalf("create-key beside a running server: %v", err)
	}
	if live == offline {
		t.Fatalf("create-key printed the same key twice")
	}
	srv.must(200, "GET", "/v1/admin/namespaces", live, nil, nil)

	// TESSERA_ADMIN_KEY chooses the key; the same key cannot be made twice.
	chosen, err := createKey(t, bin, dir, "TESSERA_ADMIN_KEY="+crashAdminKey)
	if err != nil || chosen != crashAdminKey {
		t.Fatalf("create-key with TESSERA_ADMIN_KEY printed %q, %v; want that key", chosen, err)
	}
	srv.must(200, "GET", "/v1/admin/namespaces", crashAdminKey, nil, nil)
	if again, err := createKey(t, bin, dir, "TESSERA_ADMIN_KEY="+crashAdminKey); err == nil {
		t.Fatalf("creating the existing key %s again succeeded and printed %q", crashAdminKey, again)
	}
}

// §15: every flag can come from TESSERA_<FLAG>; the command line wins.
func TestParseFlagsFromEnv(t *testing.T) {
	newSet := func() (*flag.FlagSet, *string, *time.Duration, *int, *float64) {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		data := fs.String("data", "./tessera-data", "")
		drain := fs.Duration("drain-timeout", 30*time.Second, "")
		burst := fs.Int("claim-burst", 40, "")
		rate := fs.Float64("claim-rate", 20, "")
		return fs, data, drain, burst, rate
	}

	t.Setenv("TESSERA_DATA", "/from/env")
	t.Setenv("TESSERA_DRAIN_TIMEOUT", "5s")
	t.Setenv("TESSERA_CLAIM_BURST", "7")
	fs, data, drain, burst, rate := newSet()
	if err := parseFlags(fs, []string{"--claim-burst", "9"}); err != nil {
		t.Fatal(err)
	}
	if *data != "/from/env" || *drain != 5*time.Second {
		t.Errorf("from env: data %q drain %v, want /from/env 5s", *data, *drain)
	}
	if *burst != 9 {
		t.Errorf("claim-burst = %d, want the command line's 9 over the env's 7", *burst)
	}
	if *rate != 20 {
		t.Errorf("claim-rate = %v without flag or env, want the default 20", *rate)
	}

	t.Setenv("TESSERA_CLAIM_RATE", "fast")
	fs, _, _, _, _ = newSet()
	err := parseFlags(fs, nil)
	if err == nil || !strings.Contains(err.Error(), "TESSERA_CLAIM_RATE") {
		t.Errorf("a bad env value: err = %v, want one naming TESSERA_CLAIM_RATE", err)
	}
}

// The serve command itself reads its flags from the environment: a bad
// value there stops it before it touches the data directory.
func TestServeReadsFlagsFromEnv(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "never-created")
	cases := map[string]string{
		"TESSERA_STORE":       "--store",
		"TESSERA_CLAIM_RATE":  "claim rate",
		"TESSERA_CLAIM_BURST": "claim rate, burst",
	}
	values := map[string]string{
		"TESSERA_STORE":       "mysql://db.example/tessera",
		"TESSERA_CLAIM_RATE":  "0",
		"TESSERA_CLAIM_BURST": "0",
	}
	for env, want := range cases {
		t.Run(env, func(t *testing.T) {
			t.Setenv("TESSERA_DATA", dir)
			t.Setenv(env, values[env])
			// Were the env ignored, serve would run: the timeout ends it
			// and the test fails rather than hangs.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := run(ctx, []string{"serve", "--addr", "127.0.0.1:0"}, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("serve with %s=%s: err = %v, want one about %q", env, values[env], err, want)
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("serve refused its flags but created %s (%v)", dir, err)
			}
		})
	}
}

// §2 Durability under group commit: with many clients writing at once, so
// kill -9 lands among batches of transactions committed together, every
// acknowledged enqueue, claim and submit survives, and the store holds
// nothing the clients were not told of beyond the requests in flight.
func TestKill9UnderConcurrentLoad(t *testing.T) {
	bin := buildTessera(t)
	dir := t.TempDir()
	srv := startServer(t, bin, dir, "TESSERA_ADMIN_KEY="+crashAdminKey, "TESSERA_CLAIM_RATE=100000",
		"TESSERA_CLAIM_BURST=100000", "TESSERA_CLAIM_CONCURRENCY=1000")

	type claim struct {
		Lease struct {
			TaskID string `json:"task_id"`
			Token  string `json:"token"`
		} `json:"lease"`
	}
	var mu sync.Mutex
	enqueued, claimed, submitted := map[string]string{}, map[string]bool{}, map[string]bool{}
	const clients = 16
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range clients {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				title := fmt.Sprintf("client %d task %d", w, i)
				status, b, err := srv.call("POST", "/v1/tasks", crashAdminKey, map[string]any{"title": title})
				var task wireTask
				if err != nil || status != 201 || json.Unmarshal(b, &task) != nil {
					return // the server is gone
				}
				mu.Lock()
				enqueued[task.ID] = title
				mu.Unlock()
				status, b, err = srv.call("POST", "/v1/claims", crashAdminKey, map[string]any{"queue": "default"})
				var c claim
				if err != nil || status != 200 || json.Unmarshal(b, &c) != nil {
					return
				}
				mu.Lock()
				claimed[c.Lease.TaskID] = true
				mu.Unlock()
				status, _, err = srv.call("POST", "/v1/claims/"+c.Lease.TaskID+"/submit", crashAdminKey,
					map[string]any{"lease_token": c.Lease.Token, "outcome": "succeeded"})
				if err != nil || status != 200 {
					return
				}
				mu.Lock()
				submitted[c.Lease.TaskID] = true
				mu.Unlock()
			}
		})
	}
	waitForCount(t, "submits acknowledged to the clients", 300, 60*time.Second, func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(submitted)
	})
	srv.kill()
	close(stop)
	wg.Wait()

	srv = startServer(t, bin, dir, "TESSERA_ADMIN_KEY="+crashAdminKey)
	got := srv.allTasks(crashAdminKey)
	for id, title := range enqueued {
		have, ok := got[id]
		switch {
		case !ok:
			t.Errorf("acknowledged task %s (%s) is gone after kill -9", id, title)
		case submitted[id] && have.State != "succeeded":
			t.Errorf("task %s was acknowledged succeeded, is %s after kill -9", id, have.State)
		case claimed[id] && have.Attempts < 1:
			t.Errorf("task %s was acknowledged claimed, has %d attempts after kill -9", id, have.Attempts)
		}
	}
	// Beyond the acknowledged, at most one enqueue per client was in
	// flight at the kill.
	if len(got) > len(enqueued)+clients {
		t.Errorf("%d tasks after restart, %d acknowledged and at most %d in flight", len(got), len(enqueued), clients)
	}
}
