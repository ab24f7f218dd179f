package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tessera-dev/tessera/client"
)

// node is one server the load goes to: a `tessera serve` child this run
// started, or the server at --url.
type node struct {
	url string
	// debugURL serves the server's profiles (its --debug-addr), or is "".
	debugURL string
	// pid is the server's process when it is known (a child, or --pid),
	// for its RSS and CPU time from /proc.
	pid int
	cmd *exec.Cmd
	// stderr keeps the tail of a child's log, to say why it died.
	stderr *tailBuffer
	exited chan struct{}
}

// childAdmission raises claim admission far above what any worker asks,
// so the run measures the server and not its per-key rate limit.
var childAdmission = []string{"--claim-rate", "1000000", "--claim-burst", "1000000", "--claim-concurrency", "10000"}

// startNodes starts o.Nodes `tessera serve` children on one store and
// waits until each answers /healthz. The admin key is made here and given
// through TESSERA_ADMIN_KEY; every other TESSERA_* variable of the
// caller's environment is left out, so the children run on their defaults
// and the flags below only. Each child gets a data directory of its own
// under dir (the SQLite file, or with PostgreSQL only the node's local
// files: the bench writes no blob, so none needs to be shared).
func startNodes(ctx context.Context, o LoadOptions, dir string) ([]*node, string, error) {
	key, err := newAdminKey()
	if err != nil {
		return nil, "", err
	}
	var nodes []*node
	for i := 0; i < o.Nodes; i++ {
		dataDir := filepath.Join(dir, fmt.Sprintf("node%d", i+1))
		n, err := startNode(ctx, o, dataDir, key)
		if err != nil {
			stopNodes(nodes)
			return nil, "", fmt.Errorf("start node %d: %w", i+1, err)
		}
		nodes = append(nodes, n)
	}
	return nodes, key, nil
}

func startNode(ctx context.Context, o LoadOptions, dataDir, key string) (*node, error) {
	addr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	args := append([]string{"serve", "--addr", addr, "--data", dataDir, "--store", o.Store,
		"--drain-timeout", "10s"}, childAdmission...)
	debugURL := ""
	if o.CPUProfile != "" {
		debugAddr, err := freeLoopbackAddr()
		if err != nil {
			return nil, err
		}
		args, debugURL = append(args, "--debug-addr", debugAddr), "http://"+debugAddr
	}
	cmd := exec.Command(o.Binary, args...)
	cmd.Env = append(withoutTessera(os.Environ()), "TESSERA_ADMIN_KEY="+key)
	n := &node{url: "http://" + addr, debugURL: debugURL, cmd: cmd, stderr: &tailBuffer{max: 16 << 10}, exited: make(chan struct{})}
	// The server logs a line per request; a pipe read into a bounded
	// tail costs less than a file that a soak would fill with gigabytes.
	cmd.Stderr = n.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s serve: %w", o.Binary, err)
	}
	n.pid = cmd.Process.Pid
	go func() {
		_ = cmd.Wait()
		close(n.exited)
	}()
	if err := n.waitHealthy(ctx, 60*time.Second); err != nil {
		n.stop()
		return nil, err
	}
	return n, nil
}

// waitHealthy polls /healthz until it answers 200.
func (n *node) waitHealthy(ctx context.Context, limit time.Duration) error {
	c, err := client.New(n.url, client.WithRetry(client.RetryPolicy{Attempts: 1}))
	if err != nil {
		return err
	}
	deadline := time.Now().Add(limit)
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := c.Healthz(pctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-n.exited: // nil, never ready, for a --url server
			return fmt.Errorf("server exited before it was healthy: %v%s", n.cmd.ProcessState, n.logTail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s/healthz not healthy after %s: %v%s", n.url, limit, err, n.logTail())
		}
	}
}

// logTail is the end of a child's log on a line of its own, or "".
func (n *node) logTail() string {
	if tail := n.stderr.String(); tail != "" {
		return "\n" + tail
	}
	return ""
}

// alive reports whether a started child is still running (a --url
// server always counts as alive).
func (n *node) alive() bool {
	if n.cmd == nil {
		return true
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// stop ends a started child as an operator would, with SIGTERM (it
// drains), and kills it if it has not exited 20 s later.
func (n *node) stop() {
	if n.cmd == nil || !n.alive() {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(20 * time.Second):
		_ = n.cmd.Process.Kill()
		<-n.exited
	}
}

func stopNodes(nodes []*node) {
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.stop()
		}()
	}
	wg.Wait()
}

// freeLoopbackAddr finds a loopback port nobody listens on. Another
// process could take it before the child binds it; the child then fails
// to start and says so.
func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func withoutTessera(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "TESSERA_") {
			out = append(out, kv)
		}
	}
	return out
}

const alnum = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"

// randomString is n characters of the first `of` characters of alnum.
func randomString(n, of int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	for i := range b {
		b[i] = alnum[int(b[i])%of]
	}
	return string(b), nil
}

// newAdminKey makes a key of the form the server accepts in
// TESSERA_ADMIN_KEY: tsk_<id>_<secret>.
func newAdminKey() (string, error) {
	id, err := randomString(12, 36)
	if err != nil {
		return "", err
	}
	secret, err := randomString(40, len(alnum))
	if err != nil {
		return "", err
	}
	return "tsk_bench" + id + "_" + secret, nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

// String is the tail; a --url server has no buffer, and an empty tail.
func (t *tailBuffer) String() string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(t.b))
}

// procStatus reads a process's resident memory (VmRSS) and CPU time
// (user + system) from /proc; ok is false where there is no /proc.
func procStatus(pid int) (rssBytes int64, cpu time.Duration, ok bool) {
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0, false
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, found := strings.CutPrefix(line, "VmRSS:"); found {
			f := strings.Fields(v) // "12345 kB"
			if len(f) == 2 && f[1] == "kB" {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				if err == nil {
					rssBytes = kb << 10
				}
			}
		}
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil || rssBytes == 0 {
		return 0, 0, false
	}
	cpu, err = parseProcStatCPU(string(stat))
	if err != nil {
		return 0, 0, false
	}
	return rssBytes, cpu, true
}

// clockTicks is USER_HZ, 100 on every Linux platform Go supports.
const clockTicks = 100

// parseProcStatCPU reads utime + stime from /proc/<pid>/stat. The command
// name (field 2) may hold spaces and parentheses, so fields are counted
// from the last ')'.
func parseProcStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("no command name in /proc stat")
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, errors.New("short /proc stat")
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	// 2^38 ticks is 87 years of CPU; their sum in nanoseconds fits a
	// Duration, which ticks × time.Second would not.
	if err1 != nil || err2 != nil || ut < 0 || st < 0 || ut > 1<<38 || st > 1<<38 {
		return 0, errors.New("bad cpu times in /proc stat")
	}
	return time.Duration(ut+st) * (time.Second / clockTicks), nil
}

// rawRequest sends a request the client has no method for: the CPU
// profile.
func rawRequest(ctx context.Context, hc *http.Client, method, url, key string, body []byte, header http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+key)
	return hc.Do(req)
}
