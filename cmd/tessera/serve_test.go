package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/client"
	"github.com/tessera-dev/tessera/internal/store/postgres/pgtest"
	"github.com/tessera-dev/tessera/internal/testbin"
)

// inProcess is a `tessera serve` run in the test's process.
type inProcess struct {
	stderr *lockedBuffer
	stop   func() error // ends it as SIGTERM would, and returns what serve returned
}

// serveInProcess runs `tessera serve args...` in process and waits until
// it logged that it serves. The environment has no TESSERA_ADMIN_KEY, as
// a newcomer's has none.
func serveInProcess(t *testing.T, args ...string) *inProcess {
	t.Helper()
	t.Setenv("TESSERA_ADMIN_KEY", "")
	ctx, cancel := context.WithCancel(context.Background())
	s := &inProcess{stderr: &lockedBuffer{}}
	done := make(chan error, 1)
	go func() { done <- run(ctx, append([]string{"serve"}, args...), io.Discard, s.stderr) }()
	var once bool
	var result error
	s.stop = func() error {
		if !once {
			once = true
			cancel()
			result = <-done
		}
		return result
	}
	t.Cleanup(func() { _ = s.stop() })
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(s.stderr.String(), "tessera serving") {
		select {
		case err := <-done:
			t.Fatalf("tessera serve %s ended before serving: %v\n%s", strings.Join(args, " "), err, s.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("tessera serve did not serve within 30 s:\n%s", s.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return s
}

// serveFails runs `tessera serve args...` in process, expecting it to
// fail at start, and returns its stderr and error.
func serveFails(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var stderr lockedBuffer
	err := run(context.Background(), append([]string{"serve"}, args...), io.Discard, &stderr)
	if err == nil {
		t.Fatalf("tessera serve %s started", strings.Join(args, " "))
	}
	return stderr.String(), err
}

// The first start prints where the server is — its URL, the board, the
// store, where blob bytes live and the data directory — and the admin
// key it made, ready to export; the key works. A restart on the same
// store prints the same place and no key.
func TestTheFirstStartSaysWhereAndHowToConnect(t *testing.T) {
	addr := freeAddr(t)
	data := filepath.Join(t.TempDir(), "data")
	s := serveInProcess(t, "--addr", addr, "--data", data)
	out := s.stderr.String()
	abs, _ := filepath.Abs(data)
	base := "http://" + addr
	want := fmt.Sprintf(`msg="tessera serving" url=%s board=%s/board console=%s/console store="sqlite %s" blobs="the data directory (%s)" data=%s `,
		base, base, base, filepath.Join(abs, "tessera.db"), filepath.Join(abs, "blobs"), abs)
	if !strings.Contains(out, want) {
		t.Fatalf("the start line lacks\n%s\n--- stderr\n%s", want, out)
	}
	m := regexp.MustCompile("\n  export TESSERA_URL=" + regexp.QuoteMeta(base) + "\n  export TESSERA_KEY=(tsk_[A-Za-z0-9_]+)\n").FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "shown only this once") {
		t.Fatalf("no export lines for the new admin key:\n%s", out)
	}
	c, err := client.New(base, client.WithKey(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	if me, err := c.Me(context.Background()); err != nil || !slices.Contains(me.Scopes, "admin") {
		t.Fatalf("the printed key: %+v, %v", me, err)
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}

	again := serveInProcess(t, "--addr", addr, "--data", data)
	if out := again.stderr.String(); !strings.Contains(out, want) || strings.Contains(out, "TESSERA_KEY") {
		t.Fatalf("the restart's output:\n%s", out)
	}
}

// A port already in use fails the start before anything else: no data
// directory, no store, no admin key shown for a server that never served.
func TestAPortInUseFailsBeforeAStoreIsMade(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	data := filepath.Join(t.TempDir(), "data")
	stderr, err := serveFails(t, "--addr", ln.Addr().String(), "--data", data)
	if want := "--addr " + ln.Addr().String() + " is in use"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q, want it to say %q", err, want)
	}
	if _, serr := os.Stat(data); !os.IsNotExist(serr) {
		t.Fatalf("the data directory was made: %v", serr)
	}
	if strings.Contains(stderr, "tsk_") {
		t.Fatalf("a key was shown:\n%s", stderr)
	}
}

// One SQLite data directory serves one process: a second server on it is
// refused with the holder's pid (admin create-key may still add a key
// beside it: TestAdminCreateKeyAuthenticates); the directory is free
// again once the first has stopped.
func TestASecondServerOnOneDataDirIsRefused(t *testing.T) {
	data := t.TempDir()
	first := serveInProcess(t, "--addr", freeAddr(t), "--data", data)
	_, err := serveFails(t, "--addr", freeAddr(t), "--data", data)
	want := fmt.Sprintf("data directory %s is in use by another process (pid %d): stop it, or give this one another --data", data, os.Getpid())
	if err.Error() != want {
		t.Fatalf("the second server: %v\nwant %s", err, want)
	}
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	serveInProcess(t, "--addr", freeAddr(t), "--data", data)
}

// On PostgreSQL the start line names the host, database and schema, and
// never the password in the URL.
func TestTheStartLineNamesThePostgreSQLSchema(t *testing.T) {
	u, err := url.Parse(pgtest.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), "s3cret-not-shown")
	s := serveInProcess(t, "--addr", freeAddr(t), "--data", t.TempDir(), "--store", u.String())
	want := fmt.Sprintf(`store="postgres host=%s port=%s database=%s schema=%s"`, u.Hostname(), u.Port(), strings.TrimPrefix(u.Path, "/"), u.Query().Get("search_path"))
	if out := s.stderr.String(); !strings.Contains(out, want) || strings.Contains(out, "s3cret") {
		t.Fatalf("the start line lacks %s, or shows the password:\n%s", want, out)
	}
}

// A search_path naming a schema that does not exist is refused with its
// name and the statement that makes it.
func TestAMissingPostgreSQLSchemaIsNamed(t *testing.T) {
	testbin.Needs(t, "PostgreSQL")
	u, err := url.Parse(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", "prod_never_made")
	u.RawQuery = q.Encode()
	_, err = serveFails(t, "--addr", freeAddr(t), "--data", t.TempDir(), "--store", u.String())
	want := "postgres: no schema of the search_path (prod_never_made) exists: create it first (CREATE SCHEMA prod_never_made;), or set search_path in the URL to one that exists"
	if err.Error() != want {
		t.Fatalf("error %v\nwant  %s", err, want)
	}
}
