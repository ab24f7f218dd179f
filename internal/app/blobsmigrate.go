package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/tessera-dev/tessera/internal/blobfs"
	"github.com/tessera-dev/tessera/internal/blobs"
	"github.com/tessera-dev/tessera/internal/ids"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// BlobsMigrated is what MigrateBlobs did.
type BlobsMigrated struct {
	// Moved blobs were copied into the shared byte store.
	Moved int `json:"moved"`
	// Present were there already (an earlier run, or an upload since).
	Present int `json:"present"`
	// Unnamed bytes no blob of the store names were left alone.
	Unnamed int `json:"unnamed"`
}

// MigrateBlobs copies the blob bytes of a node's data directory
// (o.DataDir/blobs) into the shared byte store o.Blobs names (the
// PostgreSQL store's database by default, or an s3:// object store),
// where every node reads them: each blob whose metadata the store o.Store
// names holds and whose bytes the shared store lacks, verified against its
// SHA-256 as an upload's are. It may run while nodes serve, and again:
// what is there is left. The files are not removed; back them up or
// delete them once the nodes serve from the shared store. out receives a
// line per blob moved.
func MigrateBlobs(ctx context.Context, o Options, out io.Writer) (BlobsMigrated, error) {
	var done BlobsMigrated
	local, err := existingBlobs(filepath.Join(o.DataDir, "blobs"))
	if err != nil {
		return done, err
	}
	db, closeDB, err := OpenExisting(ctx, o)
	if err != nil {
		return done, err
	}
	defer closeDB()
	shared, err := openBlobs(ctx, o, db)
	if err != nil {
		return done, err
	}
	if _, onDisk := shared.(*blobfs.FS); onDisk {
		return done, errors.New("blob bytes move into a store every node reads: --blobs postgres (with a postgres:// --store) or an s3:// URL")
	}
	err = local.Each(func(ns, sum string) error {
		var size int64
		err := db.View(ctx, func(tx store.Tx) error {
			b, err := tx.BlobGet(ctx, ns, sum)
			if err == nil {
				size = b.Size
			}
			return err
		})
		switch {
		case errors.Is(err, store.ErrNotFound):
			done.Unnamed++
			return nil
		case err != nil:
			return err
		}
		switch r, err := shared.Open(ctx, ns, sum); {
		case err == nil:
			r.Close()
			done.Present++
			return nil
		case !errors.Is(err, blobs.ErrMissing):
			return err
		}
		if err := copyBlob(ctx, local, shared, ns, sum, size); err != nil {
			return fmt.Errorf("blob sha256:%s of namespace %s: %w", sum, ns, err)
		}
		done.Moved++
		fmt.Fprintf(out, "moved sha256:%s of namespace %s (%d bytes)\n", sum, ns, size)
		return nil
	})
	return done, err
}

// existingBlobs opens a data directory's blob bytes, refusing to make
// one where there is none.
func existingBlobs(dir string) (*blobfs.FS, error) {
	if _, err := os.Stat(filepath.Join(dir, "ns")); err != nil {
		return nil, fmt.Errorf("no blob bytes in %s (%w): --data names the data directory of the node that stored them", dir, err)
	}
	return blobfs.Open(dir)
}

// copyBlob sends one blob's bytes from a node's disk through the steps of
// an upload of its own.
func copyBlob(ctx context.Context, from, to blobs.Bytes, ns, sum string, size int64) error {
	r, err := from.Open(ctx, ns, sum)
	if err != nil {
		return err
	}
	defer r.Close()
	id := "migrate-" + ids.New(tessera.SystemClock{}.Now())
	if _, err := to.Receive(ctx, id, r, size); err != nil {
		return err
	}
	defer func() { _ = to.Discard(context.Background(), id) }()
	return to.Promote(ctx, id, ns, sum, size)
}
