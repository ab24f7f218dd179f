package store

import (
	"context"

	"time"

	"github.com/tessera-dev/tessera/internal/tessera"
)

// RecordTx is the part of Tx that keeps records, buckets, blobs and
// namespace settings.
type RecordTx interface {
	// RecordHead returns the head version of bucket/key; ErrNotFound if the
	// record was never written.
	RecordHead(ctx context.Context, ns, bucket, key string) (int64, error)
	// RecordPut stores r as the version after prev, the head the caller
	// read (0: the record does not exist yet); r.Version is prev+1. A
	// version that exists already — the head moved — is ErrConflict and
	// nothing is written: of concurrent writers of one next version,
	// exactly one stores it.
	RecordPut(ctx context.Context, r *tessera.Record, prev int64) error
	// RecordGet returns one version of bucket/key with its value; version 0
	// means the head. ErrNotFound if there is no such version.
	RecordGet(ctx context.Context, ns, bucket, key string, version int64) (*tessera.Record, error)
	// RecordVersions returns versions of bucket/key, newest first, below
	// version before (0: from the head), with their values.
	// It stops early past PageBytes, like every listing.
	RecordVersions(ctx context.Context, ns, bucket, key string, before int64, limit int) ([]tessera.Record, error)
	// RecordHeads returns the heads of a bucket whose key starts with
	// prefix, ordered by key, after key after, with their values.
	// It stops early past PageBytes.
	RecordHeads(ctx context.Context, ns, bucket, prefix, after string, limit int) ([]tessera.Record, error)
	// RecordPublicHeads returns the heads of the namespace's public
	// buckets with their values, ordered by bucket then key, after the
	// position (bucket, key) given: what the board shows.
	RecordPublicHeads(ctx context.Context, ns, afterBucket, afterKey string, limit int) ([]tessera.Record, error)

	// BucketEnsure creates bucket name (private) unless it exists.
	BucketEnsure(ctx context.Context, ns, name string, now time.Time) error
	// BucketPut creates a bucket or changes its settings; CreatedAt is
	// kept when it exists, and b is updated to what is stored.
	BucketPut(ctx context.Context, b *tessera.Bucket) error
	BucketGet(ctx context.Context, ns, name string) (*tessera.Bucket, error)
	// BucketList returns buckets ordered by name, after the given name.
	BucketList(ctx context.Context, ns, after string, limit int) ([]tessera.Bucket, error)

	// BlobGet returns a blob's metadata; ErrNotFound if the namespace holds
	// no such blob.
	BlobGet(ctx context.Context, ns, sha256 string) (*tessera.Blob, error)
	// BlobPut stores a blob's metadata; ErrConflict if it exists.
	BlobPut(ctx context.Context, b *tessera.Blob) error
	// BlobReaderAdd records principal as a reader of a blob it uploaded
	// again (deduplicated); adding an existing reader changes nothing.
	BlobReaderAdd(ctx context.Context, ns, sha256, principalID string, now time.Time) error
	// BlobReaderCheck reports whether principal was recorded as a reader.
	BlobReaderCheck(ctx context.Context, ns, sha256, principalID string) (bool, error)

	UploadCreate(ctx context.Context, u *tessera.Upload) error
	UploadGet(ctx context.Context, ns, id string) (*tessera.Upload, error)
	// UploadDelete removes an upload; ErrNotFound if it is gone already.
	UploadDelete(ctx context.Context, ns, id string) error
	// UploadsExpired returns uploads of every namespace created before
	// before, at most limit of them.
	UploadsExpired(ctx context.Context, before time.Time, limit int) ([]tessera.Upload, error)

	// NamespaceSettingsGet returns a namespace's settings; ErrNotFound if
	// none were ever stored (the defaults apply).
	NamespaceSettingsGet(ctx context.Context, ns string) (*tessera.NamespaceSettings, error)
	// NamespaceSettingsPut creates or replaces a namespace's settings.
	NamespaceSettingsPut(ctx context.Context, s *tessera.NamespaceSettings) error
	// NamespaceSettingsCreate stores a namespace's first settings, first
	// wins: ErrConflict if it has settings, a concurrent create's
	// included (waited for until it commits or rolls back).
	NamespaceSettingsCreate(ctx context.Context, s *tessera.NamespaceSettings) error
}
