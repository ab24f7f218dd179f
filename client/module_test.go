package client_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/tessera-dev/tessera/client"
	"github.com/tessera-dev/tessera/internal/testserver"
)

// examples/worker is a module of its own that uses this package through a
// replace directive, as another module must until the module is
// published. It builds that way with no module proxy (GOPROXY=off: the
// package needs nothing beyond the standard library) and with its go.mod
// left as it is; and the worker built works tasks off a real server, then
// drains on SIGTERM and exits 0.
func TestTheExampleModuleBuildsThroughItsReplaceDirective(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the example module: %v", err)
	}
	dir := filepath.Join("..", "examples", "worker")
	modBefore, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "worker")
	build := exec.Command(goBin, "build", "-o", bin, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build in %s: %v\n%s", dir, err, out)
	}
	if modAfter, _ := os.ReadFile(filepath.Join(dir, "go.mod")); !bytes.Equal(modAfter, modBefore) {
		_ = os.WriteFile(filepath.Join(dir, "go.mod"), modBefore, 0o644)
		t.Fatalf("building changed examples/worker/go.mod (restored); it should read:\n%s", modAfter)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.sum")); err == nil {
		t.Fatal("the example needs no go.sum: it imports only this package and the standard library")
	}

	srv := testserver.Start(t, testserver.Options{})
	c := newClient(t, srv.URL, testserver.AdminKey)
	ids := enqueueN(t, c, "shout", map[string]string{"text": "hello"}, map[string]string{"text": "world"})
	worker := exec.Command(bin)
	worker.Env = append(os.Environ(), "TESSERA_URL="+srv.URL, "TESSERA_KEY="+testserver.AdminKey)
	var stderr bytes.Buffer
	worker.Stderr = &stderr
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	defer worker.Process.Kill()
	for i, want := range []string{`{"text":"HELLO"}`, `{"text":"WORLD"}`} {
		waitFor(t, "the example worker to finish task "+ids[i], func() bool {
			task, err := c.GetTask(context.Background(), ids[i])
			return err == nil && task.State == client.StateSucceeded && string(task.Result) == want
		})
	}
	if err := worker.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := worker.Wait(); err != nil {
		t.Fatalf("the example worker after SIGTERM: %v\n%s", err, stderr.String())
	}
}
