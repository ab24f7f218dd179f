package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tessera-dev/tessera/internal/blobs"
	"github.com/tessera-dev/tessera/internal/store"
)

// Blob bytes in the database (migration 0015), where every node of a
// deployment reads what any node took: blobs.Bytes over the same pool,
// metered and held to the storage allowance like every other statement.
// An upload's bytes are copied in as they arrive (COPY, a chunk at a
// time: a blob is never held whole in memory), in one transaction, so a
// receive is kept whole or not at all; the commit's promotion copies them
// to their content address in one more, before the metadata is stored.

// chunkSize is the bytes of every chunk but a blob's last.
const chunkSize = 256 << 10

// Blobs returns the store of blob bytes this database keeps.
func (db *DB) Blobs() blobs.Bytes { return blobBytes{db} }

type blobBytes struct{ db *DB }

var _ blobs.Bytes = blobBytes{}

func (b blobBytes) Where() string { return "PostgreSQL, schema " + b.db.schema }

// once runs fn in one write transaction, never again: a receive's body
// can be read only once, so a lost race fails it rather than repeats it.
func (b blobBytes) once(ctx context.Context, fn func(*tx) error) error {
	_, _, err := b.db.run(ctx, false, func(t store.Tx) error { return fn(t.(*tx)) })
	return err
}

func (b blobBytes) update(ctx context.Context, fn func(*tx) error) error {
	return b.db.Update(ctx, func(t store.Tx) error { return fn(t.(*tx)) })
}

func (b blobBytes) Receive(ctx context.Context, id string, r io.Reader, limit int64) (blobs.Received, error) {
	var got blobs.Received
	err := b.once(ctx, func(t *tx) error {
		if err := t.holdUpload(ctx, id); err != nil {
			return err
		}
		if err := t.discard(ctx, id); err != nil {
			return err
		}
		src := &chunks{id: id, at: ms(time.Now()), r: io.LimitReader(blobs.Tagged(r), limit+1), h: sha256.New(), buf: make([]byte, chunkSize)}
		n, err := t.c.CopyFrom(ctx, pgx.Identifier{"blob_parts"}, []string{"upload_id", "seq", "data", "received_at"}, src)
		if src.err != nil {
			return src.err
		}
		if err != nil {
			return t.translate("COPY blob_parts", err)
		}
		t.tally.unreported(t.db.costs.shapes, "blob_parts", n) // rows COPY wrote
		if src.size > limit {
			return blobs.ErrTooLarge
		}
		got = blobs.Received{Size: src.size, SHA256: hex.EncodeToString(src.h.Sum(nil))}
		return nil
	})
	if err != nil {
		return blobs.Received{}, err
	}
	return got, nil
}

// chunks is a COPY's rows: an upload's bytes, chunkSize a row, hashed on
// the way; at least one row, so an empty blob has its chunk 0. Its one
// buffer is reused: COPY has encoded a row before it asks for the next.
type chunks struct {
	id   string
	at   int64 // received_at
	r    io.Reader
	h    hash.Hash
	buf  []byte
	seq  int32
	n    int
	size int64
	done bool
	err  error
}

func (c *chunks) Next() bool {
	if c.done {
		return false
	}
	n, err := io.ReadFull(c.r, c.buf)
	switch {
	case errors.Is(err, io.EOF) && c.seq > 0:
		return false
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		c.done = true
	case err != nil:
		c.err = err
		return false
	}
	c.n, c.size = n, c.size+int64(n)
	c.h.Write(c.buf[:n])
	return true
}

func (c *chunks) Values() ([]any, error) {
	v := []any{c.id, c.seq, c.buf[:c.n], c.at}
	c.seq++
	return v, nil
}

func (c *chunks) Err() error { return c.err }

func (b blobBytes) Promote(ctx context.Context, id, ns, sum string, size int64) error {
	var mismatch *blobs.MismatchError
	err := b.update(ctx, func(t *tx) error {
		mismatch = nil
		if err := t.holdUpload(ctx, id); err != nil {
			return err
		}
		// What arrived is hashed again, as a file is on a disk: a
		// receive's own account is not kept.
		h, parts := sha256.New(), 0
		var got blobs.Received
		err := t.query(ctx, `SELECT data FROM blob_parts WHERE upload_id = $1 ORDER BY seq`, []any{id}, func(rows pgx.Rows) error {
			var data []byte
			err := rows.Scan(&data)
			h.Write(data)
			parts, got.Size = parts+1, got.Size+int64(len(data))
			return err
		})
		if err != nil {
			return err
		}
		if parts == 0 {
			return blobs.ErrNoUpload
		}
		got.SHA256 = hex.EncodeToString(h.Sum(nil))
		if got.Size != size || got.SHA256 != sum {
			mismatch = &blobs.MismatchError{Size: got.Size, SHA256: got.SHA256}
			return t.discard(ctx, id) // committed: the bytes are gone
		}
		var held int
		switch err := t.one(ctx, `SELECT 1 FROM blob_chunks WHERE namespace = $1 AND sha256 = $2 AND seq = 0`, []any{ns, sum}, &held); {
		case err == nil:
			return nil // the namespace holds these bytes already
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		_, err = t.exec(ctx, `INSERT INTO blob_chunks (namespace, sha256, seq, data)
 SELECT $2, $3, seq, data FROM blob_parts WHERE upload_id = $1 ORDER BY seq
 ON CONFLICT DO NOTHING`, id, ns, sum)
		return err
	})
	if err == nil && mismatch != nil {
		return mismatch
	}
	return err
}

func (b blobBytes) Discard(ctx context.Context, id string) error {
	return b.update(ctx, func(t *tx) error {
		if err := t.holdUpload(ctx, id); err != nil {
			return err
		}
		return t.discard(ctx, id)
	})
}

// holdUpload makes the transaction the only one at an upload's bytes
// until it ends: a repeat of the byte upload, the commit's promotion and
// the discard run one after another, as on a disk.
func (t *tx) holdUpload(ctx context.Context, id string) error {
	_, err := t.exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('tessera upload ' || current_schema() || ' ' || $1, 0))`, id)
	return err
}

// discard deletes an upload's received bytes.
func (t *tx) discard(ctx context.Context, id string) error {
	_, err := t.exec(ctx, `DELETE FROM blob_parts WHERE upload_id = $1`, id)
	return err
}

// Remove deletes bytes only while nothing names them: no blob's metadata,
// and no upload of them pending. The core's sweep calls it for bytes a
// crashed commit left without metadata; on several nodes another node's
// commit of the same bytes may be between its promotion and its metadata,
// and its upload, deleted only with that metadata, keeps them.
func (b blobBytes) Remove(ctx context.Context, ns, sum string) error {
	return b.update(ctx, func(t *tx) error {
		_, err := t.exec(ctx, `DELETE FROM blob_chunks WHERE namespace = $1 AND sha256 = $2
 AND NOT EXISTS (SELECT 1 FROM blobs WHERE namespace = $1 AND sha256 = $2)
 AND NOT EXISTS (SELECT 1 FROM uploads WHERE namespace = $1 AND sha256 = $2)`, ns, sum)
		return err
	})
}

// removeBatch bounds the chunks one transaction of a namespace's removal
// deletes.
const removeBatch = 64

func (b blobBytes) RemoveNamespace(ctx context.Context, ns string) error {
	for {
		var n int64
		err := b.update(ctx, func(t *tx) (err error) {
			n, err = t.exec(ctx, `DELETE FROM blob_chunks WHERE (namespace, sha256, seq) IN (
 SELECT namespace, sha256, seq FROM blob_chunks WHERE namespace = $1 LIMIT $2)`, ns, removeBatch)
			return err
		})
		if err != nil || n == 0 {
			return err
		}
	}
}

func (b blobBytes) Sweep(ctx context.Context, maxAge time.Duration) (int, error) {
	var n int
	// blob_parts holds only uploads in flight: the scan is theirs.
	err := b.update(ctx, func(t *tx) error {
		gone := map[string]bool{}
		err := t.query(ctx, `DELETE FROM blob_parts WHERE received_at < $1 RETURNING upload_id`, []any{ms(time.Now().Add(-maxAge))},
			func(rows pgx.Rows) error {
				var id string
				err := rows.Scan(&id)
				gone[id] = true
				return err
			})
		n = len(gone)
		return err
	})
	return n, err
}

func (b blobBytes) Open(ctx context.Context, ns, sum string) (io.ReadSeekCloser, error) {
	var chunks, size int64
	err := b.db.View(ctx, func(st store.Tx) error {
		return st.(*tx).one(ctx, `SELECT count(*), coalesce(sum(octet_length(data)), 0)::int8 FROM blob_chunks
 WHERE namespace = $1 AND sha256 = $2`, []any{ns, sum}, &chunks, &size)
	})
	if err != nil {
		return nil, err
	}
	if chunks == 0 {
		return nil, fmt.Errorf("%w: no chunk of %s in namespace %s", blobs.ErrMissing, sum, ns)
	}
	return &chunkReader{ctx: ctx, db: b.db, ns: ns, sum: sum, size: size}, nil
}

// chunkReader reads a blob a chunk at a time, each fetched when a read
// reaches it (a range read fetches only the chunks it covers).
type chunkReader struct {
	ctx      context.Context
	db       *DB
	ns, sum  string
	size     int64
	off      int64
	chunk    []byte
	chunkSeq int64 // the seq of chunk, -1 for none
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if r.off >= r.size {
		return 0, io.EOF
	}
	seq := r.off / chunkSize
	if r.chunk == nil || r.chunkSeq != seq {
		var data []byte
		err := r.db.View(r.ctx, func(st store.Tx) error {
			return st.(*tx).one(r.ctx, `SELECT data FROM blob_chunks WHERE namespace = $1 AND sha256 = $2 AND seq = $3`,
				[]any{r.ns, r.sum, seq}, &data)
		})
		if errors.Is(err, store.ErrNotFound) {
			return 0, fmt.Errorf("%w: chunk %d of %s in namespace %s", blobs.ErrMissing, seq, r.sum, r.ns)
		}
		if err != nil {
			return 0, err
		}
		r.chunk, r.chunkSeq = data, seq
	}
	n := copy(p, r.chunk[r.off-seq*chunkSize:])
	r.off += int64(n)
	return n, nil
}

func (r *chunkReader) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		offset += r.off
	case io.SeekEnd:
		offset += r.size
	}
	if offset < 0 {
		return 0, errors.New("postgres: seek before the start of a blob")
	}
	r.off = offset
	return offset, nil
}

func (r *chunkReader) Close() error { return nil }
