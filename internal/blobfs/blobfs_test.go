package blobfs_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/blobfs"
)

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func open(t *testing.T) *blobfs.FS {
	t.Helper()
	f, err := blobfs.Open(filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func entries(t *testing.T, dir string) int {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// Bytes received, promoted, read back from their content address.
func TestReceivePromoteOpen(t *testing.T) {
	f := open(t)
	data := []byte("some bytes")
	got, err := f.Receive("U1", bytes.NewReader(data), 100)
	if err != nil || got.Size != int64(len(data)) || got.SHA256 != sum(data) {
		t.Fatalf("receive: %+v, %v", got, err)
	}
	if f.Exists("main", sum(data)) {
		t.Fatal("received bytes are visible before promotion")
	}
	if err := f.Promote("U1", "main", sum(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(f.Root(), "ns", "main", "sha256", sum(data)[:2], sum(data)[2:4], sum(data))
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("content address: %v", err)
	}
	r, err := f.Open("main", sum(data))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r)
	r.Close()
	if !bytes.Equal(b, data) {
		t.Fatalf("read %q", b)
	}
	// Promoting twice is harmless; Discard drops the upload's own name only.
	if err := f.Promote("U1", "main", sum(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	if err := f.Discard("U1"); err != nil {
		t.Fatal(err)
	}
	if err := f.Promote("U1", "main", sum(data), int64(len(data))); !errors.Is(err, blobfs.ErrNoUpload) {
		t.Fatalf("promote after discard: %v", err)
	}
	if !f.Exists("main", sum(data)) || f.Exists("other", sum(data)) {
		t.Fatal("bytes are per namespace")
	}
	if err := f.Remove("main", sum(data)); err != nil || f.Exists("main", sum(data)) {
		t.Fatalf("remove: %v", err)
	}
}

// Bytes that are not the declared ones are discarded.
func TestPromoteMismatch(t *testing.T) {
	f := open(t)
	if _, err := f.Receive("U1", strings.NewReader("actual"), 100); err != nil {
		t.Fatal(err)
	}
	var mm *blobfs.MismatchError
	err := f.Promote("U1", "main", sum([]byte("declared")), 8)
	if !errors.As(err, &mm) || mm.SHA256 != sum([]byte("actual")) || mm.Size != 6 {
		t.Fatalf("mismatch: %v", err)
	}
	if entries(t, filepath.Join(f.Root(), "uploads")) != 0 || f.Exists("main", sum([]byte("actual"))) {
		t.Fatal("mismatched bytes kept")
	}
}

// More than the limit is ErrTooLarge, and leaves no file behind; a reader
// failure is a ReadError.
func TestReceiveLimitAndReadError(t *testing.T) {
	f := open(t)
	if _, err := f.Receive("U1", bytes.NewReader(make([]byte, 101)), 100); !errors.Is(err, blobfs.ErrTooLarge) {
		t.Fatalf("over the limit: %v", err)
	}
	if _, err := f.Receive("U1", bytes.NewReader(make([]byte, 100)), 100); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	broken := io.MultiReader(strings.NewReader("part"), iotestErr{})
	var re *blobfs.ReadError
	if _, err := f.Receive("U2", broken, 100); !errors.As(err, &re) {
		t.Fatalf("broken reader: %v", err)
	}
	if n := entries(t, filepath.Join(f.Root(), "tmp")); n != 0 {
		t.Fatalf("%d temporary files left", n)
	}
	if n := entries(t, filepath.Join(f.Root(), "uploads")); n != 1 {
		t.Fatalf("%d uploads, want the one at the limit", n)
	}
	for _, bad := range []string{"", "..", "a/b", strings.Repeat("x", 65)} {
		if _, err := f.Receive(bad, strings.NewReader("x"), 10); err == nil {
			t.Fatalf("upload id %q accepted", bad)
		}
	}
	if _, err := f.Open("../x", sum(nil)); err == nil {
		t.Fatal("namespace ../x accepted")
	}
	if blobfs.ValidSum(strings.ToUpper(sum(nil))) || blobfs.ValidSum(sum(nil)[:63]) || !blobfs.ValidSum(sum(nil)) {
		t.Fatal("ValidSum")
	}
}

type iotestErr struct{}

func (iotestErr) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

// A blob streams through a fixed buffer: receiving 16 MiB allocates far
// less than 16 MiB.
func TestReceiveStreams(t *testing.T) {
	f := open(t)
	const n = 16 << 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	got, err := f.Receive("U1", io.LimitReader(zeros{}, n), n)
	runtime.ReadMemStats(&after)
	if err != nil || got.Size != n {
		t.Fatalf("receive: %+v, %v", got, err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Fatalf("receiving %d bytes allocated %d", n, alloc)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// SweepFiles removes only files older than its age.
func TestSweepFiles(t *testing.T) {
	f := open(t)
	if _, err := f.Receive("OLD", strings.NewReader("x"), 10); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Receive("NEW", strings.NewReader("y"), 10); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(f.Root(), "tmp", "crashed.part")
	if err := os.WriteFile(stale, []byte("z"), 0o600); err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-2 * time.Hour)
	for _, p := range []string{stale, filepath.Join(f.Root(), "uploads", "OLD")} {
		if err := os.Chtimes(p, past, past); err != nil {
			t.Fatal(err)
		}
	}
	n, err := f.SweepFiles(time.Hour)
	if err != nil || n != 2 {
		t.Fatalf("sweep: %d, %v", n, err)
	}
	if err := f.Promote("NEW", "main", sum([]byte("y")), 1); err != nil {
		t.Fatalf("a fresh upload lost its bytes: %v", err)
	}
}
