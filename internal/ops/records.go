package ops

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"reflect"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/input"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// bucketRef names a bucket, in the path over HTTP.
type bucketRef struct {
	Bucket string `json:"bucket" in:"path"`
}

var bucketBound = input.Match(input.NameFormat).Doc("the bucket")

func (bucketRef) Bounds() input.Bounds { return input.Bounds{"bucket": bucketBound} }

// recordRef names a record: bucket and key.
type recordRef struct {
	Bucket string `json:"bucket" in:"path"`
	Key    string `json:"key" in:"path"`
}

func (recordRef) Bounds() input.Bounds {
	return input.Bounds{"bucket": bucketBound, "key": input.Match(input.KeyFormat).Doc("the record's key within the bucket")}
}

type putRecordIn struct {
	recordRef
	idempotency
	core.PutRecordParams
}

type getRecordIn struct {
	recordRef
	Version *int64 `json:"version,omitempty" in:"query"`
}

func (getRecordIn) Bounds() input.Bounds {
	return input.Bounds{"version": input.AtLeast(1).Doc("a version number (default: the newest)")}
}

type recordVersionsIn struct {
	recordRef
	page
}

type listRecordsIn struct {
	bucketRef
	Prefix string `json:"prefix,omitempty" in:"query"`
	page
}

func (listRecordsIn) Bounds() input.Bounds {
	return input.Bounds{"prefix": input.Match(input.PrefixFormat).Doc("only keys starting with this")}
}

type putBucketIn struct {
	bucketRef
	core.BucketParams
}

var recordOps = []*Op{
	op(Op{Name: core.ActRecordWrite, Summary: "Write the next version of a record (201 for version 1)",
		Description: "Write the next version of the JSON record at bucket/key. Every write makes a new version; old ones stay readable. " +
			"if_version N writes only if the current version is N (0: only if the record does not exist yet), else version_conflict. " +
			"Pass your lease_token to bind the version to your run of a task, so readers see which run produced it.",
		HTTP: &Route{Method: "PUT", Path: "/v1/records/{bucket}/{key}", Namespaced: true, Also: []int{http.StatusCreated},
			StatusOf: func(out any) int {
				if out.(*tessera.Record).Version == 1 {
					return http.StatusCreated
				}
				return http.StatusOK
			}},
		Tool: &Tool{Name: "write_record", Title: "Write a record"}},
		func(ctx context.Context, c *Call, in *putRecordIn) (*tessera.Record, error) {
			return c.core.PutRecord(ctx, c.Actor, c.NS, in.Bucket, in.Key, in.PutRecordParams, in.IdempotencyKey)
		}),
	op(Op{Name: core.ActRecordRead, Summary: "Read a record's head, or one version",
		Description: "Read the newest version of the record at bucket/key, or the given version. The answer names the run_id and task_id when the version was written under a lease.",
		HTTP:        &Route{Method: "GET", Path: "/v1/records/{bucket}/{key}", Namespaced: true},
		Tool:        &Tool{Name: "read_record", Title: "Read a record", ReadOnly: true}},
		func(ctx context.Context, c *Call, in *getRecordIn) (*tessera.Record, error) {
			var version int64
			if in.Version != nil {
				version = *in.Version
			}
			return c.core.GetRecord(ctx, c.Actor, c.NS, in.Bucket, in.Key, version)
		}),
	op(Op{Name: core.ActRecordHistory, Summary: "A record's versions, newest first",
		Description: "List the versions of the record at bucket/key, newest first, with who wrote each and under which run. Pass next_cursor back as cursor for the next page.",
		HTTP:        &Route{Method: "GET", Path: "/v1/records/{bucket}/{key}/versions", Namespaced: true},
		Tool:        &Tool{Name: "list_record_versions", Title: "List a record's versions", ReadOnly: true}},
		func(ctx context.Context, c *Call, in *recordVersionsIn) (*core.VersionPage, error) {
			return c.core.RecordVersions(ctx, c.Actor, c.NS, in.Bucket, in.Key, in.Cursor, in.limit())
		}),
	op(Op{Name: core.ActRecordList, Summary: "The heads of a bucket's records, by key",
		Description: "List the newest version of each record in a bucket, by key, optionally only keys starting with prefix. Pass next_cursor back as cursor for the next page.",
		HTTP:        &Route{Method: "GET", Path: "/v1/records/{bucket}", Namespaced: true},
		Tool:        &Tool{Name: "list_records", Title: "List records", ReadOnly: true}},
		func(ctx context.Context, c *Call, in *listRecordsIn) (*core.RecordPage, error) {
			return c.core.ListRecords(ctx, c.Actor, c.NS, in.Bucket, in.Prefix, in.Cursor, in.limit())
		}),
	op(Op{Name: core.ActBucketPut, Summary: "Create a bucket or replace its settings",
		Description: "Create a bucket or replace its settings: public buckets show their record heads on the board. Writing a record creates its bucket (private) on first use.",
		HTTP:        &Route{Method: "PUT", Path: "/v1/buckets/{bucket}", Namespaced: true},
		Tool:        &Tool{Name: "put_bucket", Title: "Set a bucket's settings", Idempotent: true}},
		func(ctx context.Context, c *Call, in *putBucketIn) (*tessera.Bucket, error) {
			return c.core.PutBucket(ctx, c.Actor, c.NS, in.Bucket, in.BucketParams)
		}),
	op(Op{Name: core.ActBucketList, Summary: "List buckets, by name",
		Description: "List the namespace's buckets by name, with their settings. Pass next_cursor back as cursor for the next page.",
		HTTP:        &Route{Method: "GET", Path: "/v1/buckets", Namespaced: true},
		Tool:        &Tool{Name: "list_buckets", Title: "List buckets", ReadOnly: true}},
		func(ctx context.Context, c *Call, in *page) (*core.BucketPage, error) {
			return c.core.ListBuckets(ctx, c.Actor, c.NS, in.Cursor, in.limit())
		}),
}

// uploadRef names a declared upload.
type uploadRef struct {
	UploadID string `json:"upload_id" in:"path"`
}

func (uploadRef) Bounds() input.Bounds {
	return input.Bounds{"upload_id": input.ID("upload").Doc("the upload_id of the declaration")}
}

type commitBlobIn struct {
	uploadRef
	idempotency
}

// blobRef names a blob by its hash.
type blobRef struct {
	SHA256 string `json:"sha256" in:"path"`
}

func (blobRef) Bounds() input.Bounds {
	return input.Bounds{"sha256": input.Match(input.SHA256Format).Doc("the blob's SHA-256 as 64 hex digits, or its ref sha256:<hex>")}
}

// Blob is a blob's bytes with their metadata: HTTP streams them (Range,
// ETag); MCP inlines them (readBlobResult). The caller closes Body.
type Blob struct {
	Info *core.BlobInfo
	Body io.ReadSeekCloser
}

// MaxToolBlobBytes bounds the bytes upload_blob and read_blob carry in a
// JSON-RPC message (base64 makes them a third larger); larger blobs use
// the HTTP blob routes.
const MaxToolBlobBytes = 512 << 10

type uploadBlobIn struct {
	idempotency
	Data        string `json:"data"`
	ContentType string `json:"content_type,omitempty"`
	LeaseToken  string `json:"lease_token,omitempty"`
	RawPolicy   string `json:"raw_policy,omitempty"`
}

func (uploadBlobIn) Bounds() input.Bounds {
	b := core.DeclareBlobParams{}.Bounds()
	b["data"] = input.Encoded(base64.StdEncoding.EncodedLen(MaxToolBlobBytes)).
		Doc(fmt.Sprintf("the bytes, standard base64, at most %d KiB decoded", MaxToolBlobBytes>>10))
	return b
}

// uploadedBlob answers upload_blob.
type uploadedBlob struct {
	Ref    string `json:"ref"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	// ContentType is the stored media type; absent when the bytes existed.
	ContentType string `json:"content_type,omitempty"`
	// Exists is set when the namespace held the bytes already.
	Exists bool `json:"exists"`
}

// readBlobResult answers read_blob.
type readBlobResult struct {
	core.BlobInfo
	Data *string `json:"data,omitempty" doc:"the bytes, base64; absent for a blob over 512 KiB"`
	URL  string  `json:"url" doc:"where the HTTP API serves the bytes (with Range and ETag)"`
}

var blobOps = []*Op{
	op(Op{Name: core.ActBlobDeclare, Summary: "Declare a blob upload (201), or learn the namespace holds it (200)",
		HTTP: &Route{Method: "POST", Path: "/v1/blobs", Namespaced: true, Status: http.StatusCreated, Also: []int{http.StatusOK},
			StatusOf: func(out any) int {
				if out.(*core.BlobDeclared).Exists {
					return http.StatusOK
				}
				return http.StatusCreated
			}},
		Only: blobSteps},
		func(ctx context.Context, c *Call, in *core.DeclareBlobParams) (*core.BlobDeclared, error) {
			return c.core.DeclareBlob(ctx, c.Actor, c.NS, *in)
		}),
	op(Op{Name: core.ActBlobUpload, Summary: "Send a declared upload's raw bytes",
		HTTP: &Route{Method: "PUT", Path: "/v1/blobs/uploads/{upload_id}", Namespaced: true, RawBody: true},
		Only: blobSteps},
		func(ctx context.Context, c *Call, in *uploadRef) (*core.UploadReceived, error) {
			return c.core.UploadBlob(ctx, c.Actor, c.NS, in.UploadID, c.Body)
		}),
	op(Op{Name: core.ActBlobCommit, Summary: "Verify and commit an upload",
		HTTP: &Route{Method: "POST", Path: "/v1/blobs/uploads/{upload_id}/commit", Namespaced: true},
		Only: blobSteps},
		func(ctx context.Context, c *Call, in *commitBlobIn) (*core.BlobInfo, error) {
			return c.core.CommitBlob(ctx, c.Actor, c.NS, in.UploadID, in.IdempotencyKey)
		}),
	op(Op{Name: core.ActBlobPut, Summary: "Store bytes as a blob in one call",
		Description: fmt.Sprintf("Store bytes (base64 in data, at most %d KiB once decoded) as an immutable blob addressed by their SHA-256, and get its ref (sha256:<hex>). ", MaxToolBlobBytes>>10) +
			"The same bytes always get the same ref; uploading them again stores nothing new. Pass your lease_token to bind the blob to your run. " +
			"Larger blobs go through the HTTP blob routes (POST /v1/blobs).",
		Tool: &Tool{Name: "upload_blob", Title: "Upload a blob", Idempotent: true},
		Only: "MCP's upload in one call, bytes inline; HTTP streams larger bytes in three calls (declare, upload, commit)"},
		putBlob),
	op(Op{Name: core.ActBlobRead, Summary: "A blob's bytes (ETag, Range, If-None-Match)",
		Description: fmt.Sprintf("Read a blob by its sha256 (hex, or the ref sha256:<hex>): its metadata, and its bytes as base64 in data when it is at most %d KiB ", MaxToolBlobBytes>>10) +
			"(a larger one is fetched from url with the same key).",
		HTTP: &Route{Method: "GET", Path: "/v1/blobs/{sha256}", Namespaced: true, RawResponse: true},
		Tool: &Tool{Name: "read_blob", Title: "Read a blob", ReadOnly: true, Out: reflect.TypeFor[readBlobResult](), Present: inlineBlob}},
		func(ctx context.Context, c *Call, in *blobRef) (*Blob, error) {
			info, body, err := c.core.OpenBlob(ctx, c.Actor, c.NS, in.SHA256)
			if err != nil {
				return nil, err
			}
			return &Blob{Info: info, Body: body}, nil
		}),
	op(Op{Name: core.ActBlobMeta, Summary: "A blob's metadata",
		HTTP: &Route{Method: "GET", Path: "/v1/blobs/{sha256}/meta", Namespaced: true},
		Only: "read_blob answers the metadata with the bytes"},
		func(ctx context.Context, c *Call, in *blobRef) (*core.BlobInfo, error) {
			return c.core.BlobMeta(ctx, c.Actor, c.NS, in.SHA256)
		}),
}

const blobSteps = "HTTP's upload in three calls, which streams up to the blob limit; MCP uploads in one call (upload_blob)"

// putBlob drives the three upload steps of SPEC §7 through the same core
// calls as the HTTP routes: declare, send the bytes, commit. Bytes the
// namespace holds already answer at the declaration.
func putBlob(ctx context.Context, c *Call, in *uploadBlobIn) (*uploadedBlob, error) {
	data, err := base64.StdEncoding.DecodeString(in.Data)
	if err != nil {
		return nil, tessera.Invalid("data", "data must be standard base64")
	}
	if len(data) > MaxToolBlobBytes {
		return nil, tessera.Errorf(tessera.CodePayloadTooLarge, "upload_blob carries at most %d bytes; use POST /v1/blobs for more", MaxToolBlobBytes)
	}
	sum := sha256.Sum256(data)
	size := int64(len(data))
	p := core.DeclareBlobParams{SHA256: hex.EncodeToString(sum[:]), Size: &size, ContentType: in.ContentType,
		LeaseToken: in.LeaseToken, RawPolicy: in.RawPolicy}
	declared, err := c.core.DeclareBlob(ctx, c.Actor, c.NS, p)
	if err != nil {
		return nil, err
	}
	out := &uploadedBlob{Ref: tessera.BlobRef(p.SHA256), SHA256: p.SHA256, Size: size, Exists: declared.Exists}
	if declared.Exists {
		return out, nil
	}
	if _, err := c.core.UploadBlob(ctx, c.Actor, c.NS, declared.UploadID, bytes.NewReader(data)); err != nil {
		return nil, err
	}
	info, err := c.core.CommitBlob(ctx, c.Actor, c.NS, declared.UploadID, in.IdempotencyKey)
	if err != nil {
		return nil, err
	}
	out.Ref, out.ContentType = info.Ref, info.ContentType
	return out, nil
}

// inlineBlob is read_blob's result: the metadata, and the bytes as base64
// when they fit a message.
func inlineBlob(c *Call, out any) (any, error) {
	b := out.(*Blob)
	defer b.Body.Close()
	res := readBlobResult{BlobInfo: *b.Info, URL: c.PublicURL + NamespacePrefix(c.NS) + "/v1/blobs/" + b.Info.SHA256}
	if b.Info.Size <= MaxToolBlobBytes {
		data, err := io.ReadAll(io.LimitReader(b.Body, MaxToolBlobBytes+1))
		if err != nil {
			return nil, err
		}
		encoded := base64.StdEncoding.EncodeToString(data)
		res.Data = &encoded
	}
	return res, nil
}

// NamespacePrefix is the path prefix of namespace ns's routes.
func NamespacePrefix(ns string) string {
	if ns == tessera.MainNamespace {
		return ""
	}
	return "/ns/" + ns
}
