package mcp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"time"

	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// MaxToolBlobBytes bounds the bytes upload_blob and read_blob carry in a
// JSON-RPC message (base64 makes them a third larger); larger blobs use
// the HTTP blob routes.
const MaxToolBlobBytes = 512 << 10

func (e *Endpoint) recordTools() []*tool {
	return []*tool{
		toolFunc(tool{name: "write_record", title: "Write a record", op: core.ActRecordWrite,
			description: "Write the next version of the JSON record at bucket/key (any JSON value, at most 256 KiB). Every write makes a new version; old ones stay readable. " +
				"if_version N writes only if the current version is N (0: only if the record does not exist yet), else version_conflict. " +
				"Pass your lease_token to bind the version to your run of a task, so readers see which run produced it.",
			out: tessera.Record{}}, e.writeRecord),
		toolFunc(tool{name: "read_record", title: "Read a record", op: core.ActRecordRead, readOnly: true,
			description: "Read the newest version of the record at bucket/key, or the given version. The answer names the run_id and task_id when the version was written under a lease.",
			out:         tessera.Record{}}, e.readRecord),
		toolFunc(tool{name: "list_records", title: "List records", op: core.ActRecordList, readOnly: true,
			description: "List the newest version of each record in a bucket, by key, optionally only keys starting with prefix. Pass next_cursor back as cursor for the next page.",
			out:         core.RecordPage{}}, e.listRecords),
		toolFunc(tool{name: "upload_blob", title: "Upload a blob", op: core.ActBlobCommit, idempotent: true,
			description: "Store bytes (base64 in data, at most 512 KiB once decoded) as an immutable blob addressed by their SHA-256, and get its ref (sha256:<hex>). " +
				"The same bytes always get the same ref; uploading them again stores nothing new. Pass your lease_token to bind the blob to your run. " +
				"Larger blobs go through the HTTP blob routes (POST /v1/blobs).",
			out: uploadedBlob{}}, e.uploadBlob),
		toolFunc(tool{name: "read_blob", title: "Read a blob", op: core.ActBlobRead, readOnly: true,
			description: "Read a blob by its sha256 (hex, or the ref sha256:<hex>): its metadata, and its bytes as base64 in data when it is at most 512 KiB " +
				"(a larger one is fetched from url with the same key).",
			out: readBlobResult{}}, e.readBlob),
		toolFunc(tool{name: "my_audit", title: "Read your audit trail", op: core.ActMyAudit, readOnly: true,
			description: "Read what your key's principal did in the last 24 h: one event per successful action, newest first, and counters of everything else " +
				"(failures, empty claims, timed-out waits), optionally only one action (e.g. claim.grant) or outcome (e.g. forbidden). Covers every namespace; namespace is ignored.",
			out: core.AuditPage{}}, e.myAudit),
	}
}

type recordArg struct {
	nsArg
	Bucket string `json:"bucket"`
	Key    string `json:"key"`
}

type writeRecordArgs struct {
	recordArg
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	core.PutRecordParams
}

type readRecordArgs struct {
	recordArg
	Version int64 `json:"version,omitempty"`
}

type listRecordsArgs struct {
	nsArg
	Bucket string `json:"bucket"`
	Prefix string `json:"prefix,omitempty"`
	Cursor string `json:"cursor,omitempty"`
	Limit  int    `json:"limit,omitempty"`
}

type uploadBlobArgs struct {
	nsArg
	Data           string `json:"data"`
	ContentType    string `json:"content_type,omitempty"`
	LeaseToken     string `json:"lease_token,omitempty"`
	RawPolicy      string `json:"raw_policy,omitempty"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
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

type readBlobArgs struct {
	nsArg
	SHA256 string `json:"sha256"`
}

// readBlobResult answers read_blob.
type readBlobResult struct {
	core.BlobInfo
	Data *string `json:"data,omitempty" doc:"the bytes, base64; absent for a blob over 512 KiB"`
	URL  string  `json:"url" doc:"where the HTTP API serves the bytes (with Range and ETag)"`
}

type myAuditArgs struct {
	nsArg
	Action  string     `json:"action,omitempty"`
	Outcome string     `json:"outcome,omitempty"`
	Since   *time.Time `json:"since,omitempty"`
	Cursor  string     `json:"cursor,omitempty"`
	Limit   int        `json:"limit,omitempty"`
}

func (e *Endpoint) writeRecord(ctx context.Context, c *toolCall, a *writeRecordArgs) (any, error) {
	key, err := idempotencyKey(a.IdempotencyKey)
	if err != nil {
		return nil, err
	}
	return e.core.PutRecord(ctx, c.actor, c.ns, a.Bucket, a.Key, a.PutRecordParams, key)
}

func (e *Endpoint) readRecord(ctx context.Context, c *toolCall, a *readRecordArgs) (any, error) {
	return e.core.GetRecord(ctx, c.actor, c.ns, a.Bucket, a.Key, a.Version)
}

func (e *Endpoint) listRecords(ctx context.Context, c *toolCall, a *listRecordsArgs) (any, error) {
	if err := checkQuery(map[string]string{"prefix": a.Prefix, "cursor": a.Cursor}); err != nil {
		return nil, err
	}
	return e.core.ListRecords(ctx, c.actor, c.ns, a.Bucket, a.Prefix, a.Cursor, a.Limit)
}

// uploadBlob drives the three upload steps of SPEC §7 through the same
// core calls as the HTTP routes: declare, send the bytes, commit. Bytes the
// namespace holds already answer at the declaration.
func (e *Endpoint) uploadBlob(ctx context.Context, c *toolCall, a *uploadBlobArgs) (any, error) {
	key, err := idempotencyKey(a.IdempotencyKey)
	if err != nil {
		return nil, err
	}
	if base64.StdEncoding.DecodedLen(len(a.Data)) > MaxToolBlobBytes+2 {
		return nil, tessera.Errorf(tessera.CodePayloadTooLarge, "upload_blob carries at most %d bytes; use POST /v1/blobs for more", MaxToolBlobBytes)
	}
	data, err := base64.StdEncoding.DecodeString(a.Data)
	if err != nil {
		return nil, tessera.Invalid("data", "data must be standard base64")
	}
	if len(data) > MaxToolBlobBytes {
		return nil, tessera.Errorf(tessera.CodePayloadTooLarge, "upload_blob carries at most %d bytes; use POST /v1/blobs for more", MaxToolBlobBytes)
	}
	sum := sha256.Sum256(data)
	size := int64(len(data))
	p := core.DeclareBlobParams{SHA256: hex.EncodeToString(sum[:]), Size: &size, ContentType: a.ContentType,
		LeaseToken: a.LeaseToken, RawPolicy: a.RawPolicy}
	declared, err := e.core.DeclareBlob(ctx, c.actor, c.ns, p)
	if err != nil {
		return nil, err
	}
	out := uploadedBlob{Ref: tessera.BlobRef(p.SHA256), SHA256: p.SHA256, Size: size, Exists: declared.Exists}
	if declared.Exists {
		return out, nil
	}
	if _, err := e.core.UploadBlob(ctx, c.actor, c.ns, declared.UploadID, bytes.NewReader(data)); err != nil {
		return nil, err
	}
	info, err := e.core.CommitBlob(ctx, c.actor, c.ns, declared.UploadID, key)
	if err != nil {
		return nil, err
	}
	out.Ref, out.ContentType = info.Ref, info.ContentType
	return out, nil
}

func (e *Endpoint) readBlob(ctx context.Context, c *toolCall, a *readBlobArgs) (any, error) {
	info, body, err := e.core.OpenBlob(ctx, c.actor, c.ns, a.SHA256)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	out := readBlobResult{BlobInfo: *info, URL: e.cfg.PublicURL + nsPrefix(c.ns) + "/v1/blobs/" + info.SHA256}
	if info.Size <= MaxToolBlobBytes {
		data, err := io.ReadAll(io.LimitReader(body, MaxToolBlobBytes+1))
		if err != nil {
			return nil, err
		}
		encoded := base64.StdEncoding.EncodeToString(data)
		out.Data = &encoded
	}
	return out, nil
}

func nsPrefix(ns string) string {
	if ns == tessera.MainNamespace {
		return ""
	}
	return "/ns/" + ns
}

func (e *Endpoint) myAudit(ctx context.Context, c *toolCall, a *myAuditArgs) (any, error) {
	if err := checkQuery(map[string]string{"action": a.Action, "outcome": a.Outcome, "cursor": a.Cursor}); err != nil {
		return nil, err
	}
	return e.core.MyAudit(ctx, c.actor, core.AuditQuery{Action: a.Action, Outcome: a.Outcome, Since: a.Since, Cursor: a.Cursor, Limit: a.Limit})
}
