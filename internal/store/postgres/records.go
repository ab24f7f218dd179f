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
	"github.com/tessera-dev/tessera/internal/store/sqlschema"
	"github.com/tessera-dev/tessera/internal/tessera"
)

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
	err := t.page(ctx, sqlschema.Numbered1(sql), bound(args), func(rows pgx.Rows) (int, error) {
		r, err := scanRecord(rows)
		if err != nil {
			return 0, err
		}
		out = append(out, r)
		return len(r.Value), nil
	})
	return out, err
}

var (
	recordHeadSQL       = sqlschema.Numbered1(sqlschema.RecordHead)
	recordHeadGetSQL    = sqlschema.Numbered1(sqlschema.RecordHeadGet)
	recordVersionGetSQL = sqlschema.Numbered1(sqlschema.RecordVersionGet)
	recordInsertSQL     = sqlschema.Numbered1(sqlschema.RecordInsert)
)

func (t *tx) RecordHead(ctx context.Context, ns, bucket, key string) (int64, error) {
	var v int64
	err := t.one(ctx, recordHeadSQL, []any{ns, bucket, key}, &v)
	return v, err
}

// RecordPut inserts the version first-wins: a concurrent writer of the same
// version waits for this one, then finds it taken.
func (t *tx) RecordPut(ctx context.Context, r *tessera.Record, prev int64) error {
	if r.Version != prev+1 {
		return fmt.Errorf("record %s/%s: version %d does not follow %d", r.Bucket, r.Key, r.Version, prev)
	}
	err := t.insert(ctx, fmt.Sprintf("record %s/%s version %d", r.Bucket, r.Key, r.Version), recordInsertSQL,
		bound(sqlschema.RecordInsertArgs(r))...)
	if errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("record %s/%s moved past version %d: %w", r.Bucket, r.Key, prev, err)
	}
	return err
}

func (t *tx) RecordGet(ctx context.Context, ns, bucket, key string, version int64) (*tessera.Record, error) {
	if version == 0 {
		return oneRow(ctx, t, recordHeadGetSQL, []any{ns, bucket, key}, scanRecord)
	}
	return oneRow(ctx, t, recordVersionGetSQL, []any{ns, bucket, key, version}, scanRecord)
}

func (t *tx) RecordVersions(ctx context.Context, ns, bucket, key string, before int64, limit int) ([]tessera.Record, error) {
	if before <= 0 {
		before = math.MaxInt64
	}
	return t.records(ctx, sqlschema.RecordVersions, []any{ns, bucket, key, before, limit})
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

// RecordHeads takes each key's newest version in a LATERAL subquery:
// joined, PostgreSQL's planner, costing a table it has no statistics of,
// walked the whole bucket as the outer side of the join.
func (t *tx) RecordHeads(ctx context.Context, ns, bucket, prefix, after string, limit int) ([]tessera.Record, error) {
	with, args := sqlschema.RecordKeys(ns, bucket, prefix, after, prefixEnd(prefix), limit)
	return t.records(ctx, with+`SELECT `+sqlschema.VersionCols+` FROM k CROSS JOIN LATERAL (SELECT * FROM record_versions
   WHERE namespace = ? AND bucket = ? AND key = k.key ORDER BY version DESC LIMIT 1) v
 ORDER BY k.n`, append(args, ns, bucket))
}

var publicBucketsSQL = sqlschema.Numbered1(sqlschema.PublicBuckets)

func (t *tx) RecordPublicHeads(ctx context.Context, ns, afterBucket, afterKey string, limit int) ([]tessera.Record, error) {
	return sqlschema.PublicHeads(ctx, afterBucket, afterKey, limit, func(from string, limit int) ([]string, error) {
		var names []string
		err := t.query(ctx, publicBucketsSQL, []any{ns, true, from, limit}, func(r pgx.Rows) error {
			var name string
			err := r.Scan(&name)
			names = append(names, name)
			return err
		})
		return names, err
	}, func(bucket, after string, limit int) ([]tessera.Record, error) {
		return t.RecordHeads(ctx, ns, bucket, "", after, limit)
	})
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
