// Package blobs defines where blob bytes live: the Bytes a server keeps
// them in, and the errors every kind of it reports alike. It owns the
// bytes and nothing else; which blobs exist, who may read them and which
// uploads are pending is metadata the store keeps.
//
// Three kinds exist: package blobfs keeps the bytes on one machine's disk
// (one node, SQLite); the PostgreSQL store keeps them in its database,
// where every node reads them (package postgres, blobs.go); package
// blobs3 keeps them in an S3-compatible object store, where every node
// reads them too. All pass the conformance suite in blobtest.
package blobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// Bytes keeps blob bytes through an upload's three steps — bytes
// received for an upload, verified and promoted to their content address
// at the commit, the upload's own copy discarded once the metadata is
// stored — and serves them by namespace and SHA-256.
type Bytes interface {
	// Receive stores the bytes of upload id read from r, at most limit
	// of them, hashing them on the way. They replace any received before
	// for the same upload. More than limit is ErrTooLarge, a failure of r
	// a *ReadError, and nothing is kept.
	Receive(ctx context.Context, id string, r io.Reader, limit int64) (Received, error)
	// Promote verifies the received bytes of upload id against the
	// declared size and sum and makes them the bytes of sum in namespace
	// ns (bytes the namespace holds already are kept). The upload's copy
	// stays until Discard, so a commit that fails after Promote can be
	// retried. Bytes that do not match are discarded and reported as
	// *MismatchError; none at all is ErrNoUpload.
	Promote(ctx context.Context, id, ns, sum string, size int64) error
	// Discard removes the received bytes of upload id, if any.
	Discard(ctx context.Context, id string) error
	// Open opens the bytes of sum in namespace ns; ErrMissing when they
	// are not held.
	Open(ctx context.Context, ns, sum string) (io.ReadSeekCloser, error)
	// Remove deletes the bytes of sum in namespace ns, if held. The
	// caller makes sure no metadata refers to them.
	Remove(ctx context.Context, ns, sum string) error
	// RemoveNamespace deletes every byte of namespace ns: what a
	// namespace purge does once the store holds no metadata of it.
	RemoveNamespace(ctx context.Context, ns string) error
	// Sweep removes received bytes untouched for maxAge (an upload's
	// bytes are never older than its declaration, so with maxAge at least
	// the upload lifetime no live upload loses them) and what a crash
	// left half done, and reports how many it removed.
	Sweep(ctx context.Context, maxAge time.Duration) (int, error)
	// Where names where the bytes live, for a start line.
	Where() string
}

// Received describes bytes received for an upload.
type Received struct {
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// ErrTooLarge is returned when more bytes arrive than the limit allows.
var ErrTooLarge = errors.New("blobs: more bytes than the limit")

// ErrNoUpload is returned when an upload has no received bytes.
var ErrNoUpload = errors.New("blobs: no bytes received for this upload")

// ErrMissing is returned when bytes asked for are not held.
var ErrMissing = errors.New("blobs: these bytes are not held here")

// ErrUnavailable wraps failures of a byte store that is elsewhere (an
// object store) to answer at all: the operation may succeed when retried,
// and the client is told so (503), not that the server failed.
var ErrUnavailable = errors.New("blobs: the byte store did not answer")

// ReadError is a failure to read the bytes being received (the client went
// away, or the body was cut short), as opposed to a failure to store them.
type ReadError struct{ Err error }

func (e *ReadError) Error() string { return "blobs: reading the upload: " + e.Err.Error() }
func (e *ReadError) Unwrap() error { return e.Err }

// MismatchError reports received bytes that are not what was declared.
// The bytes have been discarded.
type MismatchError struct {
	Size   int64
	SHA256 string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("blobs: received %d bytes with sha256 %s, not what was declared", e.Size, e.SHA256)
}

// ValidName reports whether s may name an upload or a namespace where
// the bytes live (a path element, a key segment): a short [A-Za-z0-9-]
// word, never "." or "..".
func ValidName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-') {
			return false
		}
	}
	return true
}

// CheckNames refuses a namespace and sum that may not name bytes.
func CheckNames(ns, sum string) error {
	if !ValidName(ns) || !ValidSum(sum) {
		return fmt.Errorf("blobs: bad namespace %q or sum %q", ns, sum)
	}
	return nil
}

// ValidSum reports whether sum is a SHA-256 sum as 64 lowercase hex digits.
func ValidSum(sum string) bool {
	if len(sum) != 64 {
		return false
	}
	for i := 0; i < len(sum); i++ {
		c := sum[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Tagged wraps the reader of an upload so its failures are *ReadErrors,
// told apart from failures to store the bytes (ErrTooLarge passes as is).
func Tagged(r io.Reader) io.Reader { return readTagged{r} }

type readTagged struct{ r io.Reader }

func (t readTagged) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err != nil && err != io.EOF {
		if errors.Is(err, ErrTooLarge) {
			return n, err
		}
		return n, &ReadError{Err: err}
	}
	return n, err
}
