package sqlschema

import (
	"context"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// The record statements both backends run alike. A record's head is its
// newest version, one seek from the end of its key's range of
// record_versions: no head row is kept beside the versions (a write was a
// version and a head, two rows; now one), and a version is inserted
// first-wins, so of two writers of the same next version one finds it
// taken, as a moved head used to tell it.

// VersionCols are the columns every record read selects (from
// record_versions as v), in the order the backends scan them.
const VersionCols = `v.namespace, v.bucket, v.key, v.version, v.value, coalesce(v.run_id, ''), coalesce(v.task_id, ''), v.written_by, v.created_at`

// RecordHead is the head version of a record: namespace, bucket, key.
const RecordHead = `SELECT version FROM record_versions WHERE namespace = ? AND bucket = ? AND key = ? ORDER BY version DESC LIMIT 1`

// RecordHeadGet is the head version of a record with its value.
const RecordHeadGet = `SELECT ` + VersionCols + ` FROM record_versions v
 WHERE v.namespace = ? AND v.bucket = ? AND v.key = ? ORDER BY v.version DESC LIMIT 1`

// RecordVersionGet is one version of a record: namespace, bucket, key,
// version.
const RecordVersionGet = `SELECT ` + VersionCols + ` FROM record_versions v
 WHERE v.namespace = ? AND v.bucket = ? AND v.key = ? AND v.version = ?`

// RecordVersions is a record's versions below a version, newest first:
// namespace, bucket, key, version, limit.
const RecordVersions = `SELECT ` + VersionCols + ` FROM record_versions v
 WHERE v.namespace = ? AND v.bucket = ? AND v.key = ? AND v.version < ? ORDER BY v.version DESC LIMIT ?`

// RecordInsert stores one version unless it exists (the caller reports
// that as a conflict): namespace, bucket, key, version, value, run_id,
// task_id, written_by, created_at.
const RecordInsert = `INSERT INTO record_versions (namespace, bucket, key, version, value, run_id, task_id, written_by, created_at)
 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`

// RecordInsertArgs are RecordInsert's arguments for r.
func RecordInsertArgs(r *tessera.Record) []any {
	return []any{r.Namespace, r.Bucket, r.Key, r.Version, string(r.Value), Nullable(r.RunID), Nullable(r.TaskID), r.WrittenBy, r.CreatedAt}
}

// RecordKeys walks the keys of a bucket's records that start with prefix,
// after key after, in order, at most limit, one seek each (a loose index
// scan, its length bounded by the limit): the WITH clause of a heads
// listing, naming k(key) (a NULL key ends it), to which each backend adds
// its select of each key's newest version, one seek more. end is the
// first key past the prefix ("" for none), which each backend computes
// for its own collation. The seeks are ORDER BY … LIMIT 1, not min():
// PostgreSQL, costing a table it has no statistics of, turns min() into
// an aggregate over the whole range.
func RecordKeys(ns, bucket, prefix, after, end string, limit int) (string, []any) {
	bound, args := "", []any{ns, bucket, after, prefix}
	if end != "" {
		bound, args = ` AND key < ?`, append(args, end)
	}
	args = append(args, ns, bucket)
	if end != "" {
		args = append(args, end)
	}
	return `WITH RECURSIVE k(key, n) AS (
  SELECT (SELECT key FROM record_versions WHERE namespace = ? AND bucket = ? AND key > ? AND key >= ?` + bound + `
    ORDER BY key LIMIT 1), 1
  UNION ALL
  SELECT (SELECT key FROM record_versions WHERE namespace = ? AND bucket = ? AND key > k.key` + bound + ` ORDER BY key LIMIT 1), n + 1
  FROM k WHERE k.key IS NOT NULL AND n < ?)
`, append(args, limit)
}

// PublicBuckets is the names of a namespace's public buckets from one on,
// in order: namespace, first name, limit.
const PublicBuckets = `SELECT name FROM buckets WHERE namespace = ? AND public = ? AND name >= ? ORDER BY name LIMIT ?`

// PublicHeads is RecordPublicHeads over a backend's public buckets (as
// PublicBuckets lists them) and its RecordHeads: the heads of the public
// buckets in (bucket, key) order after (afterBucket, afterKey), at most
// limit, a bucket at a time, stopping one row past a full PageBytes as
// every listing does.
func PublicHeads(ctx context.Context, afterBucket, afterKey string, limit int,
	buckets func(from string, limit int) ([]string, error),
	heads func(bucket, after string, limit int) ([]tessera.Record, error)) ([]tessera.Record, error) {
	var out []tessera.Record
	var budget store.PageBudget
	from, done := afterBucket, ""
	for {
		names, err := buckets(from, limit+1)
		if err != nil {
			return nil, err
		}
		for _, b := range names {
			if b == done {
				continue // the last bucket of the list before, listed again
			}
			after := ""
			if b == afterBucket {
				after = afterKey
			}
			rs, err := heads(b, after, limit-len(out))
			if err != nil {
				return nil, err
			}
			for _, r := range rs {
				out = append(out, r)
				if len(out) == limit || budget.Take(len(r.Value)) {
					return out, nil
				}
			}
		}
		if len(names) <= limit {
			return out, nil
		}
		from = names[len(names)-1]
		done = from
	}
}
