package blobs3_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/tessera-dev/tessera/internal/blobs"
	"github.com/tessera-dev/tessera/internal/blobs/blobtest"
	"github.com/tessera-dev/tessera/internal/blobs3"
	"github.com/tessera-dev/tessera/internal/blobs3/s3test"
)

// One SeaweedFS serves every case (it takes seconds to start); the last
// stops it.
func TestS3(t *testing.T) {
	srv := s3test.Start(t)
	t.Run("Conformance", func(t *testing.T) { conformance(t, srv) })
	t.Run("OpenRefuses", func(t *testing.T) { openRefuses(t, srv) })
	t.Run("Unavailable", func(t *testing.T) { unavailable(t, srv) })
}

// The conformance suite on a real SeaweedFS: each case under a prefix
// of its own in one bucket.
func conformance(t *testing.T, srv *s3test.Server) {
	n := 0
	blobtest.Run(t, func(t *testing.T) blobs.Bytes {
		n++
		s, err := blobs3.Open(context.Background(), srv.URL("case"+strconv.Itoa(n)))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// A URL that names no bucket, a scheme not http(s) or credentials in the
// URL (which is logged) are refused; so is a bucket that does not exist.
func openRefuses(t *testing.T, srv *s3test.Server) {
	ctx := context.Background()
	for _, u := range []string{
		"s3:///prefix?endpoint=" + srv.Endpoint,
		"s3://key:secret@tessera/p?endpoint=" + srv.Endpoint,
		"s3://tessera/p?endpoint=ftp://127.0.0.1",
		"http://tessera/p",
	} {
		if _, err := blobs3.Open(ctx, u); err == nil || !strings.Contains(err.Error(), "want") {
			t.Errorf("Open(%q): %v, want a refusal saying what is wanted", u, err)
		}
	}
	if _, err := blobs3.Open(ctx, "s3://absent/p?endpoint="+srv.Endpoint); err == nil || !strings.Contains(err.Error(), `bucket "absent" does not exist`) {
		t.Errorf("a missing bucket: %v", err)
	}
}

// An object store that stops answering fails every operation with
// blobs.ErrUnavailable, which the API answers 503; bytes it lacks are
// still blobs.ErrMissing while it answers.
func unavailable(t *testing.T, srv *s3test.Server) {
	ctx := context.Background()
	s, err := blobs3.Open(ctx, srv.URL("down"))
	if err != nil {
		t.Fatal(err)
	}
	sum := blobtest.Sum([]byte("x"))
	if _, err := s.Open(ctx, "main", sum); !errors.Is(err, blobs.ErrMissing) {
		t.Fatalf("absent bytes: %v", err)
	}
	srv.Stop()
	if _, err := s.Open(ctx, "main", sum); !errors.Is(err, blobs.ErrUnavailable) {
		t.Errorf("open: %v", err)
	}
	if _, err := s.Receive(ctx, "U1", strings.NewReader("x"), 10); !errors.Is(err, blobs.ErrUnavailable) {
		t.Errorf("receive: %v", err)
	}
	if err := s.Promote(ctx, "U1", "main", sum, 1); !errors.Is(err, blobs.ErrUnavailable) {
		t.Errorf("promote: %v", err)
	}
	if _, err := s.Sweep(ctx, 0); !errors.Is(err, blobs.ErrUnavailable) {
		t.Errorf("sweep: %v", err)
	}
	if err := s.RemoveNamespace(ctx, "main"); !errors.Is(err, blobs.ErrUnavailable) {
		t.Errorf("remove namespace: %v", err)
	}
}
