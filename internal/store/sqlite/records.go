package sqlite

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/store/sqlschema"
	"github.com/tessera-dev/tessera/internal/tessera"
)

func scanRecord(s *sqlite3.Stmt) tessera.Record {
	return tessera.Record{
		Namespace: s.ColumnText(0),
		Bucket:    s.ColumnText(1),
		Key:       s.ColumnText(2),
		Version:   s.ColumnInt64(3),
		Value:     colRaw(s, 4),
		RunID:     s.ColumnText(5),
		TaskID:    s.ColumnText(6),
		WrittenBy: s.ColumnText(7),
		CreatedAt: colTime(s, 8),
	}
}

func (t *tx) records(ctx context.Context, sql string, args []any) ([]tessera.Record, error) {
	var out []tessera.Record
	err := t.page(ctx, sql, args, func(s *sqlite3.Stmt) (int, error) {
		r := scanRecord(s)
		out = append(out, r)
		return len(r.Value), nil
	})
	return out, err
}

func (t *tx) RecordHead(ctx context.Context, ns, bucket, key string) (int64, error) {
	var v int64
	err := t.one(ctx, sqlschema.RecordHead, []any{ns, bucket, key}, func(s *sqlite3.Stmt) error {
		v = s.ColumnInt64(0)
		return nil
	})
	return v, err
}

func (t *tx) RecordPut(ctx context.Context, r *tessera.Record, prev int64) error {
	if r.Version != prev+1 {
		return fmt.Errorf("record %s/%s: version %d does not follow %d", r.Bucket, r.Key, r.Version, prev)
	}
	n, err := t.c.exec(ctx, sqlschema.RecordInsert, sqlschema.RecordInsertArgs(r)...)
	if err != nil {
		return fmt.Errorf("record %s/%s version %d: %w", r.Bucket, r.Key, r.Version, err)
	}
	if n == 0 {
		return fmt.Errorf("record %s/%s moved past version %d: %w", r.Bucket, r.Key, prev, store.ErrConflict)
	}
	return nil
}

func (t *tx) RecordGet(ctx context.Context, ns, bucket, key string, version int64) (*tessera.Record, error) {
	var r tessera.Record
	scan := func(s *sqlite3.Stmt) error {
		r = scanRecord(s)
		return nil
	}
	var err error
	if version == 0 {
		err = t.one(ctx, sqlschema.RecordHeadGet, []any{ns, bucket, key}, scan)
	} else {
		err = t.one(ctx, sqlschema.RecordVersionGet, []any{ns, bucket, key, version}, scan)
	}
	if err != nil {
		return nil, err
	}
	return &r, nil
}

func (t *tx) RecordVersions(ctx context.Context, ns, bucket, key string, before int64, limit int) ([]tessera.Record, error) {
	if before <= 0 {
		before = math.MaxInt64
	}
	return t.records(ctx, sqlschema.RecordVersions, []any{ns, bucket, key, before, limit})
}

// prefixEnd returns the smallest string greater than every string that
// starts with prefix ("" when there is none), so a prefix becomes a range
// of the primary key instead of a scan.
func prefixEnd(prefix string) string {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1])
		}
	}
	return ""
}

func (t *tx) RecordHeads(ctx context.Context, ns, bucket, prefix, after string, limit int) ([]tessera.Record, error) {
	with, args := sqlschema.RecordKeys(ns, bucket, prefix, after, prefixEnd(prefix), limit)
	// CROSS JOIN keeps k the outer loop: SQLite's planner otherwise walked
	// the whole bucket against a filter of the keys.
	return t.records(ctx, with+`SELECT `+sqlschema.VersionCols+` FROM k CROSS JOIN record_versions v
 WHERE v.namespace = ? AND v.bucket = ? AND v.key = k.key
   AND v.version = (SELECT max(version) FROM record_versions WHERE namespace = ? AND bucket = ? AND key = k.key)
 ORDER BY k.n`, append(args, ns, bucket, ns, bucket))
}

func (t *tx) RecordPublicHeads(ctx context.Context, ns, afterBucket, afterKey string, limit int) ([]tessera.Record, error) {
	return sqlschema.PublicHeads(ctx, afterBucket, afterKey, limit, func(from string, limit int) ([]string, error) {
		var names []string
		err := t.c.query(ctx, sqlschema.PublicBuckets, []any{ns, true, from, limit}, func(s *sqlite3.Stmt) error {
			names = append(names, s.ColumnText(0))
			return nil
		})
		return names, err
	}, func(bucket, after string, limit int) ([]tessera.Record, error) {
		return t.RecordHeads(ctx, ns, bucket, "", after, limit)
	})
}

const bucketCols = `namespace, name, public, created_at, updated_at`

func scanBucket(s *sqlite3.Stmt) tessera.Bucket {
	return tessera.Bucket{Namespace: s.ColumnText(0), Name: s.ColumnText(1), Public: s.ColumnBool(2),
		CreatedAt: colTime(s, 3), UpdatedAt: colTime(s, 4)}
}

func (t *tx) BucketEnsure(ctx context.Context, ns, name string, now time.Time) error {
	// A bucket that exists costs nothing: DO NOTHING writes no row.
	_, err := t.c.exec(ctx, `INSERT INTO buckets (`+bucketCols+`) VALUES (?, ?, 0, ?, ?) ON CONFLICT DO NOTHING`, ns, name, now, now)
	return err
}

func (t *tx) BucketPut(ctx context.Context, b *tessera.Bucket) error {
	return t.one(ctx, `INSERT INTO buckets (`+bucketCols+`) VALUES (?, ?, ?, ?, ?)
 ON CONFLICT (namespace, name) DO UPDATE SET public = excluded.public, updated_at = excluded.updated_at
 RETURNING created_at`, []any{b.Namespace, b.Name, b.Public, b.CreatedAt, b.UpdatedAt}, func(s *sqlite3.Stmt) error {
		b.CreatedAt = colTime(s, 0)
		return nil
	})
}

func (t *tx) BucketGet(ctx context.Context, ns, name string) (*tessera.Bucket, error) {
	var b tessera.Bucket
	err := t.one(ctx, `SELECT `+bucketCols+` FROM buckets WHERE namespace = ? AND name = ?`, []any{ns, name}, func(s *sqlite3.Stmt) error {
		b = scanBucket(s)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &b, nil
}

func (t *tx) BucketList(ctx context.Context, ns, after string, limit int) ([]tessera.Bucket, error) {
	var out []tessera.Bucket
	err := t.c.query(ctx, `SELECT `+bucketCols+` FROM buckets WHERE namespace = ? AND name > ? ORDER BY name LIMIT ?`,
		[]any{ns, after, limit}, func(s *sqlite3.Stmt) error {
			out = append(out, scanBucket(s))
			return nil
		})
	return out, err
}

const blobCols = `namespace, sha256, size, content_type, uploaded_by, run_id, task_id, created_at`

func (t *tx) BlobGet(ctx context.Context, ns, sum string) (*tessera.Blob, error) {
	var b tessera.Blob
	err := t.one(ctx, `SELECT `+blobCols+` FROM blobs WHERE namespace = ? AND sha256 = ?`, []any{ns, sum}, func(s *sqlite3.Stmt) error {
		b = tessera.Blob{Namespace: s.ColumnText(0), SHA256: s.ColumnText(1), Size: s.ColumnInt64(2),
			ContentType: s.ColumnText(3), UploadedBy: s.ColumnText(4), RunID: s.ColumnText(5), TaskID: s.ColumnText(6),
			CreatedAt: colTime(s, 7)}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &b, nil
}

func (t *tx) BlobPut(ctx context.Context, b *tessera.Blob) error {
	_, err := t.c.exec(ctx, `INSERT INTO blobs (`+blobCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		b.Namespace, b.SHA256, b.Size, b.ContentType, b.UploadedBy, nullable(b.RunID), nullable(b.TaskID), b.CreatedAt)
	if err != nil {
		return fmt.Errorf("insert blob %s: %w", b.SHA256, err)
	}
	return nil
}

func (t *tx) BlobReaderAdd(ctx context.Context, ns, sum, principalID string, now time.Time) error {
	_, err := t.c.exec(ctx, `INSERT INTO blob_readers (namespace, sha256, principal_id, created_at) VALUES (?, ?, ?, ?)
 ON CONFLICT DO NOTHING`, ns, sum, principalID, now)
	return err
}

func (t *tx) BlobReaderCheck(ctx context.Context, ns, sum, principalID string) (bool, error) {
	err := t.one(ctx, `SELECT 1 FROM blob_readers WHERE namespace = ? AND sha256 = ? AND principal_id = ?`,
		[]any{ns, sum, principalID}, func(*sqlite3.Stmt) error { return nil })
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

const uploadCols = `namespace, id, sha256, size, content_type, principal_id, run_id, task_id, created_at`

func scanUpload(s *sqlite3.Stmt) tessera.Upload {
	return tessera.Upload{Namespace: s.ColumnText(0), ID: s.ColumnText(1), SHA256: s.ColumnText(2), Size: s.ColumnInt64(3),
		ContentType: s.ColumnText(4), PrincipalID: s.ColumnText(5), RunID: s.ColumnText(6), TaskID: s.ColumnText(7),
		CreatedAt: colTime(s, 8)}
}

func (t *tx) UploadCreate(ctx context.Context, u *tessera.Upload) error {
	_, err := t.c.exec(ctx, `INSERT INTO uploads (`+uploadCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		u.Namespace, u.ID, u.SHA256, u.Size, u.ContentType, u.PrincipalID, nullable(u.RunID), nullable(u.TaskID), u.CreatedAt)
	if err != nil {
		return fmt.Errorf("insert upload %s: %w", u.ID, err)
	}
	return nil
}

func (t *tx) UploadGet(ctx context.Context, ns, id string) (*tessera.Upload, error) {
	var u tessera.Upload
	err := t.one(ctx, `SELECT `+uploadCols+` FROM uploads WHERE namespace = ? AND id = ?`, []any{ns, id}, func(s *sqlite3.Stmt) error {
		u = scanUpload(s)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &u, nil
}

func (t *tx) UploadDelete(ctx context.Context, ns, id string) error {
	return mustChange(t.c.exec(ctx, `DELETE FROM uploads WHERE namespace = ? AND id = ?`, ns, id))
}

func (t *tx) UploadsExpired(ctx context.Context, before time.Time, limit int) ([]tessera.Upload, error) {
	// A full scan, on purpose: the table holds only uploads of the last
	// hour, and an index on created_at would cost a row on every declare
	// and every commit.
	var out []tessera.Upload
	err := t.c.query(ctx, `SELECT `+uploadCols+` FROM uploads WHERE created_at < ? LIMIT ?`, []any{before, limit},
		func(s *sqlite3.Stmt) error {
			out = append(out, scanUpload(s))
			return nil
		})
	return out, err
}

func (t *tx) NamespaceSettingsGet(ctx context.Context, ns string) (*tessera.NamespaceSettings, error) {
	var out tessera.NamespaceSettings
	err := t.one(ctx, `SELECT namespace, raw_policy, updated_at FROM namespace_settings WHERE namespace = ?`, []any{ns},
		func(s *sqlite3.Stmt) error {
			out = tessera.NamespaceSettings{Namespace: s.ColumnText(0), RawPolicy: s.ColumnText(1), UpdatedAt: colTime(s, 2)}
			return nil
		})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

func (t *tx) NamespaceSettingsCreate(ctx context.Context, st *tessera.NamespaceSettings) error {
	n, err := t.c.exec(ctx, `INSERT INTO namespace_settings (namespace, raw_policy, updated_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`,
		st.Namespace, st.RawPolicy, st.UpdatedAt)
	if err == nil && n == 0 {
		err = store.ErrConflict
	}
	if err != nil {
		return fmt.Errorf("settings of namespace %s: %w", st.Namespace, err)
	}
	return nil
}

func (t *tx) NamespaceSettingsPut(ctx context.Context, st *tessera.NamespaceSettings) error {
	_, err := t.c.exec(ctx, `INSERT INTO namespace_settings (namespace, raw_policy, updated_at) VALUES (?, ?, ?)
 ON CONFLICT (namespace) DO UPDATE SET raw_policy = excluded.raw_policy, updated_at = excluded.updated_at`,
		st.Namespace, st.RawPolicy, st.UpdatedAt)
	return err
}
