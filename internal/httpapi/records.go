package httpapi

import (
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/tessera-dev/tessera/internal/blobfs"
	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// recordRoutes are the routes of records, buckets and blobs.
func (s *Server) recordRoutes() []route {
	return []route{
		{method: "PUT", path: "/records/{bucket}/{key}", op: core.ActRecordWrite, summary: "Write the next version of a record (201 for version 1)", handle: s.putRecord, in: core.PutRecordParams{}, out: tessera.Record{}, also: []int{http.StatusCreated}},
		{method: "GET", path: "/records/{bucket}/{key}", op: core.ActRecordRead, summary: "Read a record's head, or one version", handle: s.getRecord, in: recordQuery{}, out: tessera.Record{}},
		{method: "GET", path: "/records/{bucket}/{key}/versions", op: core.ActRecordHistory, summary: "A record's versions, newest first", handle: s.recordVersions, in: pageQuery{}, out: core.VersionPage{}},
		{method: "GET", path: "/records/{bucket}", op: core.ActRecordList, summary: "The heads of a bucket's records, by key", handle: s.listRecords, in: listRecordsQuery{}, out: core.RecordPage{}},
		{method: "PUT", path: "/buckets/{bucket}", op: core.ActBucketPut, summary: "Create a bucket or replace its settings", handle: s.putBucket, in: core.BucketParams{}, out: tessera.Bucket{}},
		{method: "GET", path: "/buckets", op: core.ActBucketList, summary: "List buckets, by name", handle: s.listBuckets, in: pageQuery{}, out: core.BucketPage{}},

		{method: "POST", path: "/blobs", op: core.ActBlobDeclare, summary: "Declare a blob upload (201), or learn the namespace holds it (200)", handle: s.declareBlob, in: core.DeclareBlobParams{}, out: created{core.BlobDeclared{}}, also: []int{http.StatusOK}},
		{method: "PUT", path: "/blobs/uploads/{upload_id}", op: core.ActBlobUpload, summary: "Send a declared upload's raw bytes", handle: s.uploadBlob, in: rawBody{}, out: core.UploadReceived{}},
		{method: "POST", path: "/blobs/uploads/{upload_id}/commit", op: core.ActBlobCommit, summary: "Verify and commit an upload", handle: s.commitBlob, out: core.BlobInfo{}},
		{method: "GET", path: "/blobs/{sha256}", op: core.ActBlobRead, summary: "A blob's bytes (ETag, Range, If-None-Match)", handle: s.getBlob, out: rawBody{}},
		{method: "GET", path: "/blobs/{sha256}/meta", op: core.ActBlobMeta, summary: "A blob's metadata", handle: s.blobMeta, out: core.BlobInfo{}},

		{method: "PUT", path: "/admin/namespaces/{ns}/settings", op: core.ActNamespaceSet, summary: "Set a namespace's settings (raw_policy)", handle: s.putSettings, in: core.NamespaceSettingsParams{}, out: tessera.NamespaceSettings{}},
		{method: "GET", path: "/admin/namespaces/{ns}/settings", op: core.ActNamespaceGet, summary: "A namespace's settings", handle: s.getSettings, out: tessera.NamespaceSettings{}},
	}
}

// Query parameters, for the API description.
type recordQuery struct {
	Version int64 `query:"version" doc:"a version number; the head when absent"`
}

type pageQuery struct {
	Cursor string `query:"cursor" doc:"next_cursor of the previous page"`
	Limit  int    `query:"limit" doc:"1–200, default 50"`
}

type listRecordsQuery struct {
	Prefix string `query:"prefix" doc:"only keys starting with this"`
	Cursor string `query:"cursor" doc:"next_cursor of the previous page"`
	Limit  int    `query:"limit" doc:"1–200, default 50"`
}

// bodyLimit is the byte limit of a request's body (SPEC §5): 1 MiB, except
// the blob upload route, whose raw bytes may reach the blob limit.
func (s *Server) bodyLimit(r *http.Request) int64 {
	if r.Method == http.MethodPut && isUploadPath(r.URL.Path) {
		return s.core.MaxBlobBytes()
	}
	return MaxBodyBytes
}

// isUploadPath reports whether p is /v1/blobs/uploads/{id}, with or
// without a /ns/{namespace} prefix.
func isUploadPath(p string) bool {
	if rest, ok := strings.CutPrefix(p, "/ns/"); ok {
		i := strings.IndexByte(rest, '/')
		if i < 0 {
			return false
		}
		p = rest[i:]
	}
	id, ok := strings.CutPrefix(p, "/v1/blobs/uploads/")
	return ok && id != "" && !strings.Contains(id, "/")
}

func (s *Server) putRecord(c *call) error {
	var p core.PutRecordParams
	if err := c.decode(&p); err != nil {
		return err
	}
	key, err := c.idempotencyKey()
	if err != nil {
		return err
	}
	rec, err := s.core.PutRecord(c.ctx, c.actor, c.ns, c.r.PathValue("bucket"), c.r.PathValue("key"), p, key)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if rec.Version == 1 {
		status = http.StatusCreated
	}
	return c.json(status, rec)
}

func (s *Server) getRecord(c *call) error {
	version, err := c.queryInt("version", 1, 1<<62)
	if err != nil {
		return err
	}
	rec, err := s.core.GetRecord(c.ctx, c.actor, c.ns, c.r.PathValue("bucket"), c.r.PathValue("key"), version)
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, rec)
}

func (s *Server) recordVersions(c *call) error {
	cursor, limit, err := c.page()
	if err != nil {
		return err
	}
	page, err := s.core.RecordVersions(c.ctx, c.actor, c.ns, c.r.PathValue("bucket"), c.r.PathValue("key"), cursor, limit)
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, page)
}

func (s *Server) listRecords(c *call) error {
	cursor, limit, err := c.page()
	if err != nil {
		return err
	}
	prefix, err := c.query("prefix")
	if err != nil {
		return err
	}
	page, err := s.core.ListRecords(c.ctx, c.actor, c.ns, c.r.PathValue("bucket"), prefix, cursor, limit)
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, page)
}

func (s *Server) putBucket(c *call) error {
	var p core.BucketParams
	if err := c.decode(&p); err != nil {
		return err
	}
	b, err := s.core.PutBucket(c.ctx, c.actor, c.ns, c.r.PathValue("bucket"), p)
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, b)
}

func (s *Server) listBuckets(c *call) error {
	cursor, limit, err := c.page()
	if err != nil {
		return err
	}
	page, err := s.core.ListBuckets(c.ctx, c.actor, c.ns, cursor, limit)
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, page)
}

func (s *Server) declareBlob(c *call) error {
	var p core.DeclareBlobParams
	if err := c.decode(&p); err != nil {
		return err
	}
	d, err := s.core.DeclareBlob(c.ctx, c.actor, c.ns, p)
	if err != nil {
		return err
	}
	if d.Exists {
		return c.json(http.StatusOK, d)
	}
	return c.json(http.StatusCreated, d)
}

// uploadBody turns the edge's byte limit into the byte store's, so an
// oversized upload answers 413 whichever notices first.
type uploadBody struct{ r io.Reader }

func (b uploadBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		err = blobfs.ErrTooLarge
	}
	return n, err
}

func (s *Server) uploadBlob(c *call) error {
	id, err := c.pathID("upload_id")
	if err != nil {
		return err
	}
	got, err := s.core.UploadBlob(c.ctx, c.actor, c.ns, id, uploadBody{c.r.Body})
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, got)
}

func (s *Server) commitBlob(c *call) error {
	id, err := c.pathID("upload_id")
	if err != nil {
		return err
	}
	if err := c.decode(&struct{}{}); err != nil {
		return err
	}
	key, err := c.idempotencyKey()
	if err != nil {
		return err
	}
	info, err := s.core.CommitBlob(c.ctx, c.actor, c.ns, id, key)
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, info)
}

// getBlob streams a blob's bytes. http.ServeContent answers Range (206),
// If-None-Match against the ETag set here (304) and HEAD; blobs never
// change, so the ETag is the hash and caches may keep them (privately:
// reads need a key).
func (s *Server) getBlob(c *call) error {
	info, body, err := s.core.OpenBlob(c.ctx, c.actor, c.ns, c.r.PathValue("sha256"))
	if err != nil {
		return err
	}
	defer body.Close()
	h := c.w.Header()
	h.Set("ETag", `"`+info.SHA256+`"`)
	h.Set("Content-Type", info.ContentType)
	h.Set("Cache-Control", "private, max-age=31536000, immutable")
	// Uploaded bytes are never run as a page of this origin.
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "sandbox")
	http.ServeContent(&rangeRefusal{ResponseWriter: c.w, size: info.Size}, c.r, "", info.CreatedAt, body)
	return nil
}

// rangeRefusal gives http.ServeContent's 416, which it writes as plain
// text, the error body every answer carries.
type rangeRefusal struct {
	http.ResponseWriter
	size    int64
	refused bool
}

func (w *rangeRefusal) WriteHeader(code int) {
	if code != http.StatusRequestedRangeNotSatisfiable {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	w.refused = true
	e := tessera.Invalid("Range", "the Range asked for lies outside the blob's %d bytes", w.size)
	writeJSON(w.ResponseWriter, code, errorBody(w.Header(), e))
}

func (w *rangeRefusal) Write(p []byte) (int, error) {
	if w.refused {
		return len(p), nil // ServeContent's plain-text message
	}
	return w.ResponseWriter.Write(p)
}

func (s *Server) blobMeta(c *call) error {
	info, err := s.core.BlobMeta(c.ctx, c.actor, c.ns, c.r.PathValue("sha256"))
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, info)
}

func (s *Server) putSettings(c *call) error {
	var p core.NamespaceSettingsParams
	if err := c.decode(&p); err != nil {
		return err
	}
	st, err := s.core.PutNamespaceSettings(c.ctx, c.actor, c.r.PathValue("ns"), p)
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, st)
}

func (s *Server) getSettings(c *call) error {
	st, err := s.core.GetNamespaceSettings(c.ctx, c.actor, c.r.PathValue("ns"))
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, st)
}
