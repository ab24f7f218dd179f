package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

const versionCols = `v.namespace, v.bucket, v.key, v.version, v.value, coalesce(v.run_id, ''), coalesce(v.task_id, ''), v.written_by, v.created_at`

func scanRecord(rows pgx.Row) (tessera.Record, error) {
	var r tessera.Record
	var value string
	var created int64
	err := rows.Scan(&r.Namespace, &r.Bucket, &r.Key, &r.Version, &value, &r.RunID, &r.TaskID, &r.WrittenBy, &created)
	r.Value, r.CreatedAt = []byte(value), fromMS(created)
	return r, err
}

func (t *tx) records(ctx context.Context, sql string, args []any) ([]tessera.Record, error) {
	var out []tessera.Record
	err := t.page(ctx, sql, args, func(rows pgx.Rows) (int, error) {
		r, err := scanRecord(rows)
		if err != nil {
			return 0, err
		}
		out = append(out, r)
		return len(r.Value), nil
	})
	return out, err
}

func (t *tx) RecordHead(ctx context.Context, ns, bucket, key string) (int64, error) {
	var v int64
	err := t.one(ctx, `SELECT version FROM record_heads WHERE namespace = $1 AND bucket = $2 AND key = $3`, []any{ns, bucket, key}, &v)
	return v, err
}

func (t *tx) RecordPut(ctx context.Context, r *tessera.Record, prev int64) error {
	// The head moves first and only from prev: a compare-and-set. A new
	// head is inserted first-wins; a concurrent writer of the same new
	// record waits for this one, then finds the head taken.
	if prev == 0 {
		err := t.insert(ctx, "record "+r.Bucket+"/"+r.Key+" head", `INSERT INTO record_heads (namespace, bucket, key, version) VALUES ($1, $2, $3, $4)
 ON CONFLICT DO NOTHING`, r.Namespace, r.Bucket, r.Key, r.Version)
		if err != nil {
			return err
		}
	} else {
		err := mustChange(t.exec(ctx, `UPDATE record_heads SET version = $1 WHERE namespace = $2 AND bucket = $3 AND key = $4 AND version = $5`,
			r.Version, r.Namespace, r.Bucket, r.Key, prev))
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("record %s/%s head moved from %d: %w", r.Bucket, r.Key, prev, store.ErrConflict)
		}
		if err != nil {
			return err
		}
	}
	_, err := t.exec(ctx, `INSERT INTO record_versions (namespace, bucket, key, version, value, run_id, task_id, written_by, created_at)
 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, r.Namespace, r.Bucket, r.Key, r.Version, string(r.Value),
		nullable(r.RunID), nullable(r.TaskID), r.WrittenBy, ms(r.CreatedAt))
	if err != nil {
		return fmt.Errorf("record %s/%s version %d: %w", r.Bucket, r.Key, r.Version, err)
	}
	return nil
}

func (t *tx) RecordGet(ctx context.Context, ns, bucket, key string, version int64) (*tessera.Record, error) {
	sql := `SELECT ` + versionCols + ` FROM record_versions v WHERE v.namespace = $1 AND v.bucket = $2 AND v.key = $3 AND v.version = $4`
	args := []any{ns, bucket, key, version}
	if version == 0 {
		sql = `SELECT ` + versionCols + ` FROM record_heads h JOIN record_versions v
 ON v.namespace = h.namespace AND v.bucket = h.bucket AND v.key = h.key AND v.version = h.version
 WHERE h.namespace = $1 AND h.bucket = $2 AND h.key = $3`
		args = args[:3]
	}
	return oneRow(ctx, t, sql, args, scanRecord)
}

func (t *tx) RecordVersions(ctx context.Context, ns, bucket, key string, before int64, limit int) ([]tessera.Record, error) {
	if before <= 0 {
		before = math.MaxInt64
	}
	return t.records(ctx, `SELECT `+versionCols+` FROM record_versions v
 WHERE v.namespace = $1 AND v.bucket = $2 AND v.key = $3 AND v.version < $4 ORDER BY v.version DESC LIMIT $5`,
		[]any{ns, bucket, key, before, limit})
}

// prefixEnd returns the smallest string greater than every string that
// starts with prefix ("" when there is none), so a prefix becomes a range
// of the primary key. Keys are COLLATE "C", bytewise, and UTF-8 byte
// order is code point order, so the bound is the prefix with its last
// code point raised by one: unlike SQLite's byte increment, still valid
// UTF-8, which text must be.
func prefixEnd(prefix string) string {
	runes := []rune(prefix)
	for i := len(runes) - 1; i >= 0; i-- {
		next := runes[i] + 1
		if next >= 0xD800 && next <= 0xDFFF { // no surrogates in UTF-8
			next = 0xE000
		}
		if next <= utf8.MaxRune {
			runes[i] = next
			return string(runes[:i+1])
		}
	}
	return ""
}

func (t *tx) RecordHeads(ctx context.Context, ns, bucket, prefix, after string, limit int) ([]tessera.Record, error) {
	sql := `SELECT ` + versionCols + ` FROM record_heads h JOIN record_versions v
 ON v.namespace = h.namespace AND v.bucket = h.bucket AND v.key = h.key AND v.version = h.version
 WHERE h.namespace = $1 AND h.bucket = $2 AND h.key > $3 AND h.key >= $4`
	args := []any{ns, bucket, after, prefix}
	if end := prefixEnd(prefix); end != "" {
		sql += ` AND h.key < $5`
		args = append(args, end)
	}
	args = append(args, limit)
	sql += fmt.Sprintf(` ORDER BY h.key LIMIT $%d`, len(args))
	return t.records(ctx, sql, args)
}

func (t *tx) RecordPublicHeads(ctx context.Context, ns, afterBucket, afterKey string, limit int) ([]tessera.Record, error) {
	return t.records(ctx, `SELECT `+versionCols+` FROM buckets b
 JOIN record_heads h ON h.namespace = b.namespace AND h.bucket = b.name
 JOIN record_versions v ON v.namespace = h.namespace AND v.bucket = h.bucket AND v.key = h.key AND v.version = h.version
 WHERE b.namespace = $1 AND b.public AND (h.bucket, h.key) > ($2, $3)
 ORDER BY h.bucket, h.key LIMIT $4`, []any{ns, afterBucket, afterKey, limit})
}

const bucketCols = `namespace, name, public, created_at, updated_at`

func scanBucket(rows pgx.Row) (tessera.Bucket, error) {
	var b tessera.Bucket
	var created, updated int64
	err := rows.Scan(&b.Namespace, &b.Name, &b.Public, &created, &updated)
	b.CreatedAt, b.UpdatedAt = fromMS(created), fromMS(updated)
	return b, err
}

func (t *tx) BucketEnsure(ctx context.Context, ns, name string, now time.Time) error {
	// A bucket that exists costs nothing: DO NOTHING writes no row.
	_, err := t.exec(ctx, `INSERT INTO buckets (`+bucketCols+`) VALUES ($1, $2, false, $3, $3) ON CONFLICT DO NOTHING`, ns, name, ms(now))
	return err
}

func (t *tx) BucketPut(ctx context.Context, b *tessera.Bucket) error {
	var created int64
	err := t.one(ctx, `INSERT INTO buckets (`+bucketCols+`) VALUES ($1, $2, $3, $4, $5)
 ON CONFLICT (namespace, name) DO UPDATE SET public = excluded.public, updated_at = excluded.updated_at
 RETURNING created_at`, []any{b.Namespace, b.Name, b.Public, ms(b.CreatedAt), ms(b.UpdatedAt)}, &created)
	if err == nil {
		b.CreatedAt = fromMS(created)
	}
	return err
}

func (t *tx) BucketGet(ctx context.Context, ns, name string) (*tessera.Bucket, error) {
	return oneRow(ctx, t, `SELECT `+bucketCols+` FROM buckets WHERE namespace = $1 AND name = $2`, []any{ns, name}, scanBucket)
}

func (t *tx) BucketList(ctx context.Context, ns, after string, limit int) ([]tessera.Bucket, error) {
	var out []tessera.Bucket
	err := t.query(ctx, `SELECT `+bucketCols+` FROM buckets WHERE namespace = $1 AND name > $2 ORDER BY name LIMIT $3`,
		[]any{ns, after, limit}, func(rows pgx.Rows) error {
			b, err := scanBucket(rows)
			out = append(out, b)
			return err
		})
	return out, err
}

const blobCols = `namespace, sha256, size, content_type, uploaded_by, coalesce(run_id, ''), coalesce(task_id, ''), created_at`

func (t *tx) BlobGet(ctx context.Context, ns, sum string) (*tessera.Blob, error) {
	var b tessera.Blob
	var created int64
	err := t.one(ctx, `SELECT `+blobCols+` FROM blobs WHERE namespace = $1 AND sha256 = $2`, []any{ns, sum},
		&b.Namespace, &b.SHA256, &b.Size, &b.ContentType, &b.UploadedBy, &b.RunID, &b.TaskID, &created)
	if err != nil {
		return nil, err
	}
	b.CreatedAt = fromMS(created)
	return &b, nil
}

func (t *tx) BlobPut(ctx context.Context, b *tessera.Blob) error {
	return t.insert(ctx, "insert blob "+b.SHA256, `INSERT INTO blobs (namespace, sha256, size, content_type, uploaded_by, run_id, task_id, created_at)
 VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING`,
		b.Namespace, b.SHA256, b.Size, b.ContentType, b.UploadedBy, nullable(b.RunID), nullable(b.TaskID), ms(b.CreatedAt))
}

func (t *tx) BlobReaderAdd(ctx context.Context, ns, sum, principalID string, now time.Time) error {
	_, err := t.exec(ctx, `INSERT INTO blob_readers (namespace, sha256, principal_id, created_at) VALUES ($1, $2, $3, $4)
 ON CONFLICT DO NOTHING`, ns, sum, principalID, ms(now))
	return err
}

func (t *tx) BlobReaderCheck(ctx context.Context, ns, sum, principalID string) (bool, error) {
	var one int
	err := t.one(ctx, `SELECT 1 FROM blob_readers WHERE namespace = $1 AND sha256 = $2 AND principal_id = $3`,
		[]any{ns, sum, principalID}, &one)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

const uploadCols = `namespace, id, sha256, size, content_type, principal_id, coalesce(run_id, ''), coalesce(task_id, ''), created_at`

func scanUpload(rows pgx.Row) (tessera.Upload, error) {
	var u tessera.Upload
	var created int64
	err := rows.Scan(&u.Namespace, &u.ID, &u.SHA256, &u.Size, &u.ContentType, &u.PrincipalID, &u.RunID, &u.TaskID, &created)
	u.CreatedAt = fromMS(created)
	return u, err
}

func (t *tx) UploadCreate(ctx context.Context, u *tessera.Upload) error {
	return t.insert(ctx, "insert upload "+u.ID, `INSERT INTO uploads (namespace, id, sha256, size, content_type, principal_id, run_id, task_id, created_at)
 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING`,
		u.Namespace, u.ID, u.SHA256, u.Size, u.ContentType, u.PrincipalID, nullable(u.RunID), nullable(u.TaskID), ms(u.CreatedAt))
}

func (t *tx) UploadGet(ctx context.Context, ns, id string) (*tessera.Upload, error) {
	return oneRow(ctx, t, `SELECT `+uploadCols+` FROM uploads WHERE namespace = $1 AND id = $2`, []any{ns, id}, scanUpload)
}

func (t *tx) UploadDelete(ctx context.Context, ns, id string) error {
	return mustChange(t.exec(ctx, `DELETE FROM uploads WHERE namespace = $1 AND id = $2`, ns, id))
}

func (t *tx) UploadsExpired(ctx context.Context, before time.Time, limit int) ([]tessera.Upload, error) {
	// A sequential scan, on purpose: the table holds only uploads of the
	// last hour, and an index on created_at would cost a row on every
	// declare and every commit.
	var out []tessera.Upload
	err := t.query(ctx, `SELECT `+uploadCols+` FROM uploads WHERE created_at < $1 LIMIT $2`, []any{ms(before), limit},
		func(rows pgx.Rows) error {
			u, err := scanUpload(rows)
			out = append(out, u)
			return err
		})
	return out, err
}

func (t *tx) NamespaceSettingsGet(ctx context.Context, ns string) (*tessera.NamespaceSettings, error) {
	var out tessera.NamespaceSettings
	var updated int64
	err := t.one(ctx, `SELECT namespace, raw_policy, updated_at FROM namespace_settings WHERE namespace = $1`, []any{ns},
		&out.Namespace, &out.RawPolicy, &updated)
	if err != nil {
		return nil, err
	}
	out.UpdatedAt = fromMS(updated)
	return &out, nil
}

func (t *tx) NamespaceSettingsCreate(ctx context.Context, st *tessera.NamespaceSettings) error {
	return t.insert(ctx, "settings of namespace "+st.Namespace, `INSERT INTO namespace_settings (namespace, raw_policy, updated_at) VALUES ($1, $2, $3)
 ON CONFLICT DO NOTHING`, st.Namespace, st.RawPolicy, ms(st.UpdatedAt))
}

func (t *tx) NamespaceSettingsPut(ctx context.Context, st *tessera.NamespaceSettings) error {
	_, err := t.exec(ctx, `INSERT INTO namespace_settings (namespace, raw_policy, updated_at) VALUES ($1, $2, $3)
 ON CONFLICT (namespace) DO UPDATE SET raw_policy = excluded.raw_policy, updated_at = excluded.updated_at`,
		st.Namespace, st.RawPolicy, ms(st.UpdatedAt))
	return err
}
