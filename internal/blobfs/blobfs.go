// Package blobfs keeps blob bytes on the filesystem, under one directory of
// the data directory: the blobs.Bytes of one node.
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
	"context"
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

	"github.com/tessera-dev/tessera/internal/blobs"
	"github.com/tessera-dev/tessera/internal/fsync"
)

var _ blobs.Bytes = (*FS)(nil)

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

// Where names the directory, for a start line.
func (f *FS) Where() string { return "the data directory (" + f.root + ")" }

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

// Receive stores the bytes in tmp/, fsyncs them, and renames them to the
// upload's name.
func (f *FS) Receive(_ context.Context, id string, r io.Reader, limit int64) (blobs.Received, error) {
	if !blobs.ValidName(id) {
		return blobs.Received{}, fmt.Errorf("blobfs: bad upload id %q", id)
	}
	tmp, err := os.CreateTemp(f.tmpDir(), id+".*.part")
	if err != nil {
		return blobs.Received{}, fmt.Errorf("blobfs: %w", err)
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(blobs.Tagged(r), limit+1))
	if err != nil {
		return blobs.Received{}, err
	}
	if n > limit {
		return blobs.Received{}, blobs.ErrTooLarge
	}
	if err := tmp.Sync(); err != nil {
		return blobs.Received{}, fmt.Errorf("blobfs: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return blobs.Received{}, fmt.Errorf("blobfs: %w", err)
	}
	mu := f.lock(id)
	mu.Lock()
	err = os.Rename(tmp.Name(), f.uploadPath(id))
	mu.Unlock()
	if err != nil {
		return blobs.Received{}, fmt.Errorf("blobfs: %w", err)
	}
	done = true
	if err := syncDir(f.uploadDir()); err != nil {
		return blobs.Received{}, err
	}
	return blobs.Received{Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// Promote hashes the upload's file and links it to the content address.
func (f *FS) Promote(_ context.Context, id, ns, sum string, size int64) error {
	if err := blobs.CheckNames(ns, sum); err != nil {
		return err
	}
	if !blobs.ValidName(id) {
		return fmt.Errorf("blobfs: bad upload id %q", id)
	}
	mu := f.lock(id)
	mu.Lock()
	defer mu.Unlock()
	src := f.uploadPath(id)
	got, err := hashFile(src)
	if errors.Is(err, fs.ErrNotExist) {
		return blobs.ErrNoUpload
	}
	if err != nil {
		return err
	}
	if got.Size != size || got.SHA256 != sum {
		if err := os.Remove(src); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("blobfs: %w", err)
		}
		return &blobs.MismatchError{Size: got.Size, SHA256: got.SHA256}
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

func hashFile(path string) (blobs.Received, error) {
	file, err := os.Open(path)
	if err != nil {
		return blobs.Received{}, err
	}
	defer file.Close()
	h := sha256.New()
	n, err := io.Copy(h, file)
	if err != nil {
		return blobs.Received{}, fmt.Errorf("blobfs: %w", err)
	}
	return blobs.Received{Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// Discard removes the upload's file, if any.
func (f *FS) Discard(_ context.Context, id string) error {
	if !blobs.ValidName(id) {
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

// Open opens the file at the content address.
func (f *FS) Open(_ context.Context, ns, sum string) (io.ReadSeekCloser, error) {
	if err := blobs.CheckNames(ns, sum); err != nil {
		return nil, err
	}
	file, err := os.Open(f.blobPath(ns, sum))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %w", blobs.ErrMissing, err)
	}
	if err != nil {
		return nil, fmt.Errorf("blobfs: %w", err)
	}
	return file, nil
}

// Exists reports whether namespace ns holds committed bytes of sum.
func (f *FS) Exists(ns, sum string) bool {
	if blobs.CheckNames(ns, sum) != nil {
		return false
	}
	_, err := os.Stat(f.blobPath(ns, sum))
	return err == nil
}

// Each calls fn with the namespace and sum of every blob's committed
// bytes, a namespace at a time, until fn fails.
func (f *FS) Each(fn func(ns, sum string) error) error {
	spaces, err := os.ReadDir(filepath.Join(f.root, "ns"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("blobfs: %w", err)
	}
	for _, space := range spaces {
		ns := space.Name()
		if !space.IsDir() || !blobs.ValidName(ns) {
			continue
		}
		err := filepath.WalkDir(filepath.Join(f.root, "ns", ns, "sha256"), func(path string, d fs.DirEntry, err error) error {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil || !d.Type().IsRegular() || !blobs.ValidSum(d.Name()) {
				return err
			}
			return fn(ns, d.Name())
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// Remove deletes the file at the content address, if any.
func (f *FS) Remove(_ context.Context, ns, sum string) error {
	if err := blobs.CheckNames(ns, sum); err != nil {
		return err
	}
	if err := os.Remove(f.blobPath(ns, sum)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("blobfs: %w", err)
	}
	return nil
}

// RemoveNamespace moves the namespace's directory aside under tmp/ first
// (one rename, so a crash never leaves half a namespace's bytes at their
// names), then removes it; Sweep clears what a crash left there.
func (f *FS) RemoveNamespace(_ context.Context, ns string) error {
	if !blobs.ValidName(ns) {
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

// Sweep removes files in tmp/ and uploads/ not modified for maxAge: bytes
// of a crashed receive, or of an upload whose metadata is gone.
func (f *FS) Sweep(_ context.Context, maxAge time.Duration) (int, error) {
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
