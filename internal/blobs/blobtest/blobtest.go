// Package blobtest is the conformance suite every blobs.Bytes passes: the
// same cases on a node's disk and in PostgreSQL, so a server behaves the
// same whichever holds its bytes.
package blobtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/blobs"
)

// Opener returns a fresh, empty store for one case; the backend's test
// closes it in t.Cleanup.
type Opener func(t *testing.T) blobs.Bytes

// Sum is the SHA-256 of b as blobs name it.
func Sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// Run runs every case against stores from open.
func Run(t *testing.T, open Opener) {
	ctx := context.Background()
	t.Run("ReceivePromoteOpen", func(t *testing.T) {
		b := open(t)
		data := []byte("some bytes")
		got, err := b.Receive(ctx, "U1", bytes.NewReader(data), 100)
		if err != nil || got.Size != int64(len(data)) || got.SHA256 != Sum(data) {
			t.Fatalf("receive: %+v, %v", got, err)
		}
		if _, err := b.Open(ctx, "main", Sum(data)); !errors.Is(err, blobs.ErrMissing) {
			t.Fatalf("received bytes open before their promotion: %v", err)
		}
		if err := b.Promote(ctx, "U1", "main", Sum(data), int64(len(data))); err != nil {
			t.Fatal(err)
		}
		if got := read(t, b, "main", Sum(data)); !bytes.Equal(got, data) {
			t.Fatalf("read %q", got)
		}
		// Promoting twice is harmless; Discard drops the upload's copy only.
		if err := b.Promote(ctx, "U1", "main", Sum(data), int64(len(data))); err != nil {
			t.Fatal(err)
		}
		if err := b.Discard(ctx, "U1"); err != nil {
			t.Fatal(err)
		}
		if err := b.Promote(ctx, "U1", "main", Sum(data), int64(len(data))); !errors.Is(err, blobs.ErrNoUpload) {
			t.Fatalf("promote after discard: %v", err)
		}
		if got := read(t, b, "main", Sum(data)); !bytes.Equal(got, data) {
			t.Fatalf("read after discard: %q", got)
		}
		if _, err := b.Open(ctx, "other", Sum(data)); !errors.Is(err, blobs.ErrMissing) {
			t.Fatalf("bytes of namespace main open in another: %v", err)
		}
		if err := b.Remove(ctx, "main", Sum(data)); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Open(ctx, "main", Sum(data)); !errors.Is(err, blobs.ErrMissing) {
			t.Fatalf("removed bytes open: %v", err)
		}
		if err := b.Remove(ctx, "main", Sum(data)); err != nil {
			t.Fatalf("removing what is gone: %v", err)
		}
	})

	t.Run("EmptyBlob", func(t *testing.T) {
		b := open(t)
		if _, err := b.Receive(ctx, "U1", strings.NewReader(""), 100); err != nil {
			t.Fatal(err)
		}
		if err := b.Promote(ctx, "U1", "main", Sum(nil), 0); err != nil {
			t.Fatal(err)
		}
		if got := read(t, b, "main", Sum(nil)); len(got) != 0 {
			t.Fatalf("read %d bytes of an empty blob", len(got))
		}
	})

	// A blob larger than any chunk or buffer reads back whole, and from
	// any offset, as a range read asks for it.
	t.Run("LargeBlobSeeks", func(t *testing.T) {
		b := open(t)
		data := make([]byte, 3<<20+12345)
		for i := range data {
			data[i] = byte(i * 7 / 3)
		}
		if _, err := b.Receive(ctx, "U1", bytes.NewReader(data), int64(len(data))); err != nil {
			t.Fatal(err)
		}
		if err := b.Promote(ctx, "U1", "main", Sum(data), int64(len(data))); err != nil {
			t.Fatal(err)
		}
		if got := read(t, b, "main", Sum(data)); !bytes.Equal(got, data) {
			t.Fatalf("read %d bytes, not the %d written", len(got), len(data))
		}
		r, err := b.Open(ctx, "main", Sum(data))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if end, err := r.Seek(0, io.SeekEnd); err != nil || end != int64(len(data)) {
			t.Fatalf("seek to the end: %d, %v", end, err)
		}
		for _, off := range []int64{0, 1, 256<<10 - 1, 256 << 10, 1<<20 + 17, int64(len(data)) - 3} {
			if _, err := r.Seek(off, io.SeekStart); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, 100)
			n, err := io.ReadFull(r, got)
			if want := min(int64(100), int64(len(data))-off); int64(n) != want || !bytes.Equal(got[:n], data[off:off+want]) {
				t.Fatalf("at %d: read %d bytes (%v), not the %d there", off, n, err, want)
			}
		}
		if n, err := r.Read(make([]byte, 10)); n != 0 || err != io.EOF {
			t.Fatalf("read past the end: %d, %v", n, err)
		}
	})

	t.Run("MismatchIsDiscarded", func(t *testing.T) {
		b := open(t)
		if _, err := b.Receive(ctx, "U1", strings.NewReader("actual"), 100); err != nil {
			t.Fatal(err)
		}
		var mm *blobs.MismatchError
		err := b.Promote(ctx, "U1", "main", Sum([]byte("declared")), 8)
		if !errors.As(err, &mm) || mm.SHA256 != Sum([]byte("actual")) || mm.Size != 6 {
			t.Fatalf("mismatch: %v", err)
		}
		if err := b.Promote(ctx, "U1", "main", Sum([]byte("actual")), 6); !errors.Is(err, blobs.ErrNoUpload) {
			t.Fatalf("mismatched bytes kept: %v", err)
		}
		if _, err := b.Open(ctx, "main", Sum([]byte("actual"))); !errors.Is(err, blobs.ErrMissing) {
			t.Fatalf("mismatched bytes promoted: %v", err)
		}
	})

	// A repeat of the byte upload replaces what was sent before.
	t.Run("ReceiveAgainReplaces", func(t *testing.T) {
		b := open(t)
		for _, s := range []string{"first, and longer", "second"} {
			if _, err := b.Receive(ctx, "U1", strings.NewReader(s), 100); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Promote(ctx, "U1", "main", Sum([]byte("second")), 6); err != nil {
			t.Fatal(err)
		}
	})

	// More than the limit is ErrTooLarge and keeps nothing; a reader
	// failure is a ReadError and keeps nothing either.
	t.Run("LimitAndReadError", func(t *testing.T) {
		b := open(t)
		if _, err := b.Receive(ctx, "U1", bytes.NewReader(make([]byte, 101)), 100); !errors.Is(err, blobs.ErrTooLarge) {
			t.Fatalf("over the limit: %v", err)
		}
		if err := b.Promote(ctx, "U1", "main", Sum(make([]byte, 101)), 101); !errors.Is(err, blobs.ErrNoUpload) {
			t.Fatalf("bytes over the limit kept: %v", err)
		}
		if _, err := b.Receive(ctx, "U2", bytes.NewReader(make([]byte, 100)), 100); err != nil {
			t.Fatalf("at the limit: %v", err)
		}
		var re *blobs.ReadError
		if _, err := b.Receive(ctx, "U3", io.MultiReader(strings.NewReader("part"), failing{}), 100); !errors.As(err, &re) {
			t.Fatalf("broken reader: %v", err)
		}
		if err := b.Promote(ctx, "U3", "main", Sum([]byte("part")), 4); !errors.Is(err, blobs.ErrNoUpload) {
			t.Fatalf("bytes of a broken upload kept: %v", err)
		}
	})

	// The same bytes in two namespaces are two; in one, the second
	// upload keeps the first's.
	t.Run("PerNamespaceOnce", func(t *testing.T) {
		b := open(t)
		data := []byte("shared")
		for i, ns := range []string{"a", "a", "b"} {
			id := string(rune('A'+i)) + "1"
			if _, err := b.Receive(ctx, id, bytes.NewReader(data), 100); err != nil {
				t.Fatal(err)
			}
			if err := b.Promote(ctx, id, ns, Sum(data), int64(len(data))); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.RemoveNamespace(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Open(ctx, "a", Sum(data)); !errors.Is(err, blobs.ErrMissing) {
			t.Fatalf("bytes of a purged namespace open: %v", err)
		}
		if got := read(t, b, "b", Sum(data)); !bytes.Equal(got, data) {
			t.Fatalf("the other namespace's bytes: %q", got)
		}
		if err := b.RemoveNamespace(ctx, "gone"); err != nil {
			t.Fatalf("removing a namespace with no bytes: %v", err)
		}
	})

	// The sweep removes received bytes older than its age, and keeps
	// younger ones.
	t.Run("SweepByAge", func(t *testing.T) {
		b := open(t)
		if _, err := b.Receive(ctx, "U1", strings.NewReader("x"), 10); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Sweep(ctx, time.Hour); err != nil {
			t.Fatal(err)
		}
		if err := b.Promote(ctx, "U1", "main", Sum([]byte("x")), 1); err != nil {
			t.Fatalf("a fresh upload lost its bytes: %v", err)
		}
		if _, err := b.Receive(ctx, "U2", strings.NewReader("y"), 10); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
		if n, err := b.Sweep(ctx, time.Millisecond); err != nil || n != 2 {
			t.Fatalf("sweep of everything received: %d, %v; want both uploads", n, err)
		}
		if err := b.Promote(ctx, "U2", "main", Sum([]byte("y")), 1); !errors.Is(err, blobs.ErrNoUpload) {
			t.Fatalf("swept bytes kept: %v", err)
		}
		if got := read(t, b, "main", Sum([]byte("x"))); string(got) != "x" {
			t.Fatalf("promoted bytes swept: %q", got)
		}
	})

	// Bytes stream: receiving 16 MiB allocates far less than 16 MiB.
	t.Run("ReceiveStreams", func(t *testing.T) {
		b := open(t)
		const n = 16 << 20
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		got, err := b.Receive(ctx, "U1", io.LimitReader(zeros{}, n), n)
		runtime.ReadMemStats(&after)
		if err != nil || got.Size != n {
			t.Fatalf("receive: %+v, %v", got, err)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
			t.Fatalf("receiving %d bytes allocated %d", n, alloc)
		}
	})
}

func read(t *testing.T, b blobs.Bytes, ns, sum string) []byte {
	t.Helper()
	r, err := b.Open(context.Background(), ns, sum)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

type failing struct{}

func (failing) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
