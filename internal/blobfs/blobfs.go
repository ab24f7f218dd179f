// Package blobfs keeps blob bytes on the filesystem, under one directory of
// the data directory. It owns every byte of a blob and nothing else: which
// blobs exist, who may read them and which uploads are pending is metadata
// the store keeps.
//
// Layout under the root:
//
//	tmp/<upload id>.*.part          bytes being received
//	uploads/<upload id>             received bytes, fsynced, awaiting commit
//	ns/<namespace>/sha256/ab/cd/<hex>  committed bytes, content-addressed
//
// Every file reaches its name by rename or link after an fsync, and the
// directory is fsynced after it, so a crash leaves either the whole file at
// its name or nothing there. Bytes stream through a fixed buffer and are
// hashed while they are written; a blob is never held whole in memory.
package blobfs

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tessera-dev/tessera/internal/fsync"
)

// ErrTooLarge is returned when more bytes arrive than the limit allows.
var ErrTooLarge = errors.New("blobfs: more bytes than the limit")

// ErrNoUpload is returned when an upload has no received bytes.
var ErrNoUpload = errors.New("blobfs: no bytes received for this upload")

// ReadError is a failure to read the bytes being received (the client went
// away, or the body was cut short), as opposed to a failure to store them.
type ReadError struct{ Err error }

func (e *ReadError) Error() string { return "blobfs: reading the upload: " + e.Err.Error() }
func (e *ReadError) Unwrap() error { return e.Err }

// MismatchError reports received bytes that are not what was declared.
// The bytes have been discarded.
type MismatchError struct {
	Size   int64
	SHA256 string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("blobfs: received %d bytes with sha256 %s, not what was declared", e.Size, e.SHA256)
}

// Received describes bytes stored for an upload.
type Received struct {
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// FS is a blob byte store rooted at one directory.
type FS struct {
	root string
	// locks serialize, per upload id, the final rename of received bytes
	// with their verification at commit, so a commit never links bytes
	// other than those it verified.
	locks [64]sync.Mutex
}

// Open returns the store rooted at dir, creating its directories.
func Open(dir string) (*FS, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("blobfs: %w", err)
	}
	f := &FS{root: root}
	for _, d := range []string{f.root, f.tmpDir(), f.uploadDir(), filepath.Join(f.root, "ns")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("blobfs: %w", err)
		}
	}
	return f, syncDir(f.root)
}

// Root returns the directory the store lives in.
func (f *FS) Root() string { return f.root }

func (f *FS) tmpDir() string    { return filepath.Join(f.root, "tmp") }
func (f *FS) uploadDir() string { return filepath.Join(f.root, "uploads") }

func (f *FS) uploadPath(id string) string { return filepath.Join(f.uploadDir(), id) }

// blobPath is where the committed bytes of sum live in namespace ns.
func (f *FS) blobPath(ns, sum string) string {
	return filepath.Join(f.root, "ns", ns, "sha256", sum[0:2], sum[2:4], sum)
}

func (f *FS) lock(id string) *sync.Mutex {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return &f.locks[h.Sum32()%uint32(len(f.locks))]
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

// validName guards every name that becomes a path element: upload ids and
// namespaces are short [A-Za-z0-9-] words, never "." or "..".
func validName(s string) bool {
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

func checkNames(ns, sum string) error {
	if !validName(ns) || !ValidSum(sum) {
		return fmt.Errorf("blobfs: bad namespace %q or sum %q", ns, sum)
	}
	return nil
}

// readTagged marks errors of the underlying reader as ReadErrors, so they
// are told apart from failures to write.
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

// Receive stores the bytes of upload id read from r, at most limit of them,
// hashing them on the way. The bytes replace any received earlier for the
// same upload. More than limit bytes is ErrTooLarge and nothing is kept.
func (f *FS) Receive(id string, r io.Reader, limit int64) (Received, error) {
	if !validName(id) {
		return Received{}, fmt.Errorf("blobfs: bad upload id %q", id)
	}
	tmp, err := os.CreateTemp(f.tmpDir(), id+".*.part")
	if err != nil {
		return Received{}, fmt.Errorf("blobfs: %w", err)
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(readTagged{r}, limit+1))
	if err != nil {
		return Received{}, err
	}
	if n > limit {
		return Received{}, ErrTooLarge
	}
	if err := tmp.Sync(); err != nil {
		return Received{}, fmt.Errorf("blobfs: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return Received{}, fmt.Errorf("blobfs: %w", err)
	}
	mu := f.lock(id)
	mu.Lock()
	err = os.Rename(tmp.Name(), f.uploadPath(id))
	mu.Unlock()
	if err != nil {
		return Received{}, fmt.Errorf("blobfs: %w", err)
	}
	done = true
	if err := syncDir(f.uploadDir()); err != nil {
		return Received{}, err
	}
	return Received{Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// Promote verifies the received bytes of upload id against the declared
// size and sum and makes them the committed bytes of sum in namespace ns.
// The upload's file stays until Discard, so a commit that fails after
// Promote can be retried. Bytes that do not match are discarded and
// reported as *MismatchError; no bytes at all is ErrNoUpload.
func (f *FS) Promote(id, ns, sum string, size int64) error {
	if err := checkNames(ns, sum); err != nil {
		return err
	}
	if !validName(id) {
		return fmt.Errorf("blobfs: bad upload id %q", id)
	}
	mu := f.lock(id)
	mu.Lock()
	defer mu.Unlock()
	src := f.uploadPath(id)
	got, err := hashFile(src)
	if errors.Is(err, fs.ErrNotExist) {
		return ErrNoUpload
	}
	if err != nil {
		return err
	}
	if got.Size != size || got.SHA256 != sum {
		if err := os.Remove(src); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("blobfs: %w", err)
		}
		return &MismatchError{Size: got.Size, SHA256: got.SHA256}
	}
	dst := f.blobPath(ns, sum)
	if _, err := os.Stat(dst); err == nil {
		return nil // the namespace holds these bytes already
	}
	if err := f.mkdirs(filepath.Dir(dst)); err != nil {
		return err
	}
	// A hard link publishes the fsynced bytes at their name atomically and
	// leaves the upload's own name in place until the metadata is stored.
	if err := os.Link(src, dst); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("blobfs: %w", err)
	}
	return syncDir(filepath.Dir(dst))
}

// mkdirs creates dir and the missing parents below the root, fsyncing
// each parent whose entries changed.
func (f *FS) mkdirs(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir && strings.HasPrefix(parent, f.root) {
		if err := f.mkdirs(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("blobfs: %w", err)
	}
	return syncDir(parent)
}

func hashFile(path string) (Received, error) {
	file, err := os.Open(path)
	if err != nil {
		return Received{}, err
	}
	defer file.Close()
	h := sha256.New()
	n, err := io.Copy(h, file)
	if err != nil {
		return Received{}, fmt.Errorf("blobfs: %w", err)
	}
	return Received{Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// Discard removes the received bytes of upload id, if any.
func (f *FS) Discard(id string) error {
	if !validName(id) {
		return nil
	}
	mu := f.lock(id)
	mu.Lock()
	defer mu.Unlock()
	if err := os.Remove(f.uploadPath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("blobfs: %w", err)
	}
	return nil
}

// Open opens the committed bytes of sum in namespace ns.
func (f *FS) Open(ns, sum string) (*os.File, error) {
	if err := checkNames(ns, sum); err != nil {
		return nil, err
	}
	return os.Open(f.blobPath(ns, sum))
}

// Exists reports whether namespace ns holds committed bytes of sum.
func (f *FS) Exists(ns, sum string) bool {
	if checkNames(ns, sum) != nil {
		return false
	}
	_, err := os.Stat(f.blobPath(ns, sum))
	return err == nil
}

// Remove deletes the committed bytes of sum in namespace ns, if any. The
// caller makes sure no metadata refers to them.
func (f *FS) Remove(ns, sum string) error {
	if err := checkNames(ns, sum); err != nil {
		return err
	}
	if err := os.Remove(f.blobPath(ns, sum)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("blobfs: %w", err)
	}
	return nil
}

// RemoveNamespace deletes every committed byte of namespace ns: what a
// namespace purge does once the store holds no metadata of it. It is moved
// aside under tmp/ first (one rename, so a crash never leaves half a
// namespace's bytes at their names), then removed; SweepFiles clears what a
// crash left there.
func (f *FS) RemoveNamespace(ns string) error {
	if !validName(ns) {
		return fmt.Errorf("blobfs: bad namespace %q", ns)
	}
	dir := filepath.Join(f.root, "ns", ns)
	doomed := filepath.Join(f.tmpDir(), "purge-"+ns+"-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err := os.Rename(dir, doomed); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("blobfs: %w", err)
	}
	if err := os.RemoveAll(doomed); err != nil {
		return fmt.Errorf("blobfs: %w", err)
	}
	return nil
}

// SweepFiles removes files in tmp/ and uploads/ not modified for maxAge:
// bytes of a crashed receive, or of an upload whose metadata is gone. An
// upload's file is never older than its declaration, so with maxAge at
// least the upload lifetime no live upload loses its bytes.
func (f *FS) SweepFiles(maxAge time.Duration) (int, error) {
	cutoff := time.Now().Add(-maxAge)
	removed := 0
	for _, dir := range []string{f.tmpDir(), f.uploadDir()} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return removed, fmt.Errorf("blobfs: %w", err)
		}
		for _, e := range entries {
			if e.IsDir() && strings.HasPrefix(e.Name(), "purge-") {
				// A namespace purge that crashed before removing its bytes.
				if err := os.RemoveAll(filepath.Join(dir, e.Name())); err == nil {
					removed++
				}
				continue
			}
			info, err := e.Info()
			if err != nil || !info.Mode().IsRegular() || info.ModTime().After(cutoff) {
				continue
			}
			if err := os.Remove(filepath.Join(dir, e.Name())); err == nil {
				removed++
			}
		}
	}
	return removed, nil
}

func syncDir(dir string) error {
	if err := fsync.Dir(dir); err != nil {
		return fmt.Errorf("blobfs: %w", err)
	}
	return nil
}
