// Package s3test starts a real S3-compatible object store for tests:
// SeaweedFS (`weed server -s3`), one process per test, on loopback ports
// and a temporary directory. scripts/test-setup builds the weed binary
// from the Go module proxy at the version in weed.version.
package s3test

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/tessera-dev/tessera/internal/testbin"
)

//go:embed weed.version
var version string

// Credentials the server accepts, and the bucket Start makes.
const (
	AccessKey = "tessera-test"
	SecretKey = "tessera-test-secret"
	Bucket    = "tessera"
)

// Binary is the weed binary: $TESSERA_TEST_WEED, or where
// scripts/test-setup builds it.
func Binary() string { return testbin.Path("TESSERA_TEST_WEED", "weed", version) }

// Server is a running SeaweedFS with an S3 gateway.
type Server struct {
	// Endpoint is the S3 gateway's base URL.
	Endpoint string
	cmd      *exec.Cmd
	log      *bytes.Buffer
	stop     sync.Once
}

// URL is the --blobs URL of a prefix in the server's bucket.
func (s *Server) URL(prefix string) string {
	return fmt.Sprintf("s3://%s/%s?endpoint=%s", Bucket, prefix, s.Endpoint)
}

// Env is what a process needs in its environment to reach the server.
func Env() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + AccessKey, "AWS_SECRET_ACCESS_KEY=" + SecretKey}
}

// Start starts a server for t, with Bucket made and the credentials in
// t's environment (so t may not be parallel), and stops it when t ends.
// A missing binary fails t, saying how to build it.
func Start(t testing.TB) *Server {
	testbin.Needs(t, "SeaweedFS")
	t.Helper()
	bin := Binary()
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no SeaweedFS for the S3 tests at %s (%v): `make test` builds it (scripts/test-setup)", bin, err)
	}
	for _, kv := range Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	dir := t.TempDir()
	config := filepath.Join(dir, "s3.json")
	identity := fmt.Sprintf(`{"identities":[{"name":"tessera","credentials":[{"accessKey":%q,"secretKey":%q}],"actions":["Admin","Read","Write","List","Tagging"]}]}`, AccessKey, SecretKey)
	if err := os.WriteFile(config, []byte(identity), 0o600); err != nil {
		t.Fatal(err)
	}
	ports := freePorts(t, 4)
	s3 := ports[3]
	s := &Server{Endpoint: "http://127.0.0.1:" + strconv.Itoa(s3), log: &bytes.Buffer{}}
	s.cmd = exec.Command(bin, "server", "-dir="+dir, "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		"-master.port="+strconv.Itoa(ports[0]), "-master.volumeSizeLimitMB=64",
		"-volume.port="+strconv.Itoa(ports[1]), "-volume.max=8",
		"-filer", "-filer.port="+strconv.Itoa(ports[2]),
		"-s3", "-s3.port="+strconv.Itoa(s3), "-s3.config="+config)
	s.cmd.Dir = dir
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("SeaweedFS log (last 4 KiB):\n%s", testbin.Tail(s.log.Bytes(), 4<<10))
		}
	})
	s.ready(t)
	return s
}

// Stop kills the server; a second call does nothing.
func (s *Server) Stop() {
	s.stop.Do(func() {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	})
}

// ready waits until the bucket is made and an object can be written: the
// gateway answers before the volume server has registered.
func (s *Server) ready(t testing.TB) {
	t.Helper()
	c, err := minio.New(strings.TrimPrefix(s.Endpoint, "http://"), &minio.Options{Creds: credentials.NewStaticV4(AccessKey, SecretKey, "")})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		last = c.MakeBucket(ctx, Bucket, minio.MakeBucketOptions{})
		if r := minio.ToErrorResponse(last); r.Code == "BucketAlreadyOwnedByYou" || r.Code == "BucketAlreadyExists" {
			last = nil
		}
		if last == nil {
			_, last = c.PutObject(ctx, Bucket, "ready", strings.NewReader("ok"), 2, minio.PutObjectOptions{})
		}
		cancel()
		if last == nil {
			_ = c.RemoveObject(context.Background(), Bucket, "ready", minio.RemoveObjectOptions{})
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("SeaweedFS at %s not ready in 60 s: %v", s.Endpoint, last)
}

// freePorts finds n loopback ports free now, each with the port 10000
// above it free too (weed's gRPC ports).
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var out []int
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for len(out) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
		p := l.Addr().(*net.TCPAddr).Port
		if p+10000 > 65535 {
			continue
		}
		g, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000))
		if err != nil {
			continue
		}
		held = append(held, g)
		out = append(out, p)
	}
	return out
}
