package blobfs_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/blobfs"
	"github.com/tessera-dev/tessera/internal/blobs"
	"github.com/tessera-dev/tessera/internal/blobs/blobtest"
)

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

func TestConformance(t *testing.T) {
	blobtest.Run(t, func(t *testing.T) blobs.Bytes { return open(t) })
}

// Committed bytes live at their content address; a receive leaves no
// temporary file behind, whatever became of it.
func TestLayout(t *testing.T) {
	ctx := context.Background()
	f := open(t)
	data := []byte("some bytes")
	sum := blobtest.Sum(data)
	if _, err := f.Receive(ctx, "U1", strings.NewReader(string(data)), 100); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Receive(ctx, "U2", strings.NewReader(strings.Repeat("x", 101)), 100); err == nil {
		t.Fatal("over the limit accepted")
	}
	if err := f.Promote(ctx, "U1", "main", sum, int64(len(data))); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(f.Root(), "ns", "main", "sha256", sum[:2], sum[2:4], sum)); err != nil {
		t.Fatalf("content address: %v", err)
	}
	if n := entries(t, filepath.Join(f.Root(), "tmp")); n != 0 {
		t.Fatalf("%d temporary files left", n)
	}
	if !f.Exists("main", sum) || f.Exists("other", sum) {
		t.Fatal("bytes are per namespace")
	}
}

// Names that would leave the root are refused.
func TestBadNames(t *testing.T) {
	ctx := context.Background()
	f := open(t)
	for _, bad := range []string{"", "..", "a/b", strings.Repeat("x", 65)} {
		if _, err := f.Receive(ctx, bad, strings.NewReader("x"), 10); err == nil {
			t.Fatalf("upload id %q accepted", bad)
		}
	}
	if _, err := f.Open(ctx, "../x", blobtest.Sum(nil)); err == nil {
		t.Fatal("namespace ../x accepted")
	}
	if blobs.ValidSum(strings.ToUpper(blobtest.Sum(nil))) || blobs.ValidSum(blobtest.Sum(nil)[:63]) || !blobs.ValidSum(blobtest.Sum(nil)) {
		t.Fatal("ValidSum")
	}
}

// The sweep removes what a crashed receive left in tmp/, by its age.
func TestSweepCrashedFiles(t *testing.T) {
	f := open(t)
	stale := filepath.Join(f.Root(), "tmp", "crashed.part")
	fresh := filepath.Join(f.Root(), "tmp", "receiving.part")
	for _, p := range []string{stale, fresh} {
		if err := os.WriteFile(p, []byte("z"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(stale, past, past); err != nil {
		t.Fatal(err)
	}
	n, err := f.Sweep(context.Background(), time.Hour)
	if err != nil || n != 1 {
		t.Fatalf("sweep: %d, %v", n, err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Fatalf("a receive in progress lost its file: %v", err)
	}
}
