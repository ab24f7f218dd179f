package httpapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/blobfs"
	"github.com/tessera-dev/tessera/internal/blobs"
	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// declared answers POST /v1/blobs.
type declared struct {
	Exists    bool   `json:"exists"`
	Ref       string `json:"ref"`
	UploadID  string `json:"upload_id"`
	ExpiresAt string `json:"expires_at"`
	MaxBytes  int64  `json:"max_bytes"`
}

// blobMeta answers a commit and GET /v1/blobs/{sha256}/meta.
type blobMeta struct {
	Ref         string `json:"ref"`
	SHA256      string `json:"sha256"`
	Size        int64  `json:"size"`
	ContentType string `json:"content_type"`
	UploadedBy  string `json:"uploaded_by"`
	RunID       string `json:"run_id"`
	TaskID      string `json:"task_id"`
}

// declare declares data (with extra body fields) and expects status.
func (s *testServer) declare(want int, ns, key string, data []byte, fields map[string]any) declared {
	s.t.Helper()
	body := map[string]any{"sha256": sum(data), "size": len(data), "content_type": "text/plain"}
	for k, v := range fields {
		body[k] = v
	}
	var d declared
	s.must(want, "POST", nsPath(ns, "/v1/blobs"), key, body).decode(s.t, &d)
	return d
}

// uploadBlob runs the three calls for data and returns the commit's answer.
func (s *testServer) uploadBlob(ns, key string, data []byte, fields map[string]any, headers ...string) blobMeta {
	s.t.Helper()
	d := s.declare(201, ns, key, data, fields)
	s.must(200, "PUT", nsPath(ns, "/v1/blobs/uploads/"+d.UploadID), key, data)
	var m blobMeta
	s.must(200, "POST", nsPath(ns, "/v1/blobs/uploads/"+d.UploadID+"/commit"), key, nil, headers...).decode(s.t, &m)
	return m
}

// blobStored reports whether the store holds metadata for the blob.
func blobStored(t testing.TB, st store.Store, ns, sum string) bool {
	t.Helper()
	ctx := context.Background()
	err := st.View(ctx, func(tx store.Tx) error {
		_, err := tx.BlobGet(ctx, ns, sum)
		return err
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// uploadHeld reports whether the server's blob bytes hold what was
// received for upload id, on either kind of byte store: a probe that
// promotes them under a sum they cannot have, and so discards them if
// they are there.
func (s *testServer) uploadHeld(t *testing.T, id string) bool {
	t.Helper()
	err := s.Core.Blobs().Promote(t.Context(), id, "probe", strings.Repeat("0", 64), -1)
	var mm *blobs.MismatchError
	switch {
	case errors.Is(err, blobs.ErrNoUpload):
		return false
	case errors.As(err, &mm):
		return true
	}
	t.Fatalf("probing upload %s: %v", id, err)
	return false
}

// bytesHeld reports whether the server's blob bytes hold sum in ns at
// its content address.
func (s *testServer) bytesHeld(t *testing.T, ns, sum string) bool {
	t.Helper()
	r, err := s.Core.Blobs().Open(t.Context(), ns, sum)
	if errors.Is(err, blobs.ErrMissing) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	return true
}

// Declare, upload, commit; then the bytes read back with their headers,
// and the metadata names the uploader.
func TestBlobThreeCallUpload(t *testing.T) {
	s := newTestServer(t)
	w, wID := s.newKey("agent", "namespace:main", "write", "read")
	data := []byte("hello, blob")

	d := s.declare(201, "main", w, data, nil)
	if d.Exists || d.UploadID == "" || d.ExpiresAt == "" || d.MaxBytes != 32<<20 {
		t.Fatalf("declare: %+v", d)
	}
	var got struct {
		Size    int64  `json:"size"`
		SHA256  string `json:"sha256"`
		Matches bool   `json:"matches"`
	}
	s.must(200, "PUT", "/v1/blobs/uploads/"+d.UploadID, w, data).decode(t, &got)
	if got.Size != int64(len(data)) || got.SHA256 != sum(data) || !got.Matches {
		t.Fatalf("upload: %+v", got)
	}
	// Before the commit nothing is visible.
	wantError(t, s.do("GET", "/v1/blobs/"+sum(data), w, nil), 404, "not_found", "")
	var m blobMeta
	s.must(200, "POST", "/v1/blobs/uploads/"+d.UploadID+"/commit", w, nil).decode(t, &m)
	if m.Ref != "sha256:"+sum(data) || m.Size != int64(len(data)) || m.ContentType != "text/plain" || m.UploadedBy != wID {
		t.Fatalf("commit: %+v", m)
	}

	r := s.must(200, "GET", "/v1/blobs/"+sum(data), w, nil)
	if !bytes.Equal(r.Body, data) || r.Header.Get("ETag") != `"`+sum(data)+`"` || r.Header.Get("Content-Type") != "text/plain" ||
		r.Header.Get("Content-Length") != strconv.Itoa(len(data)) || r.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("read: %q %v", r.Body, r.Header)
	}
	// The ref form is accepted too.
	s.must(200, "GET", "/v1/blobs/sha256:"+sum(data), w, nil)
	var meta blobMeta
	s.must(200, "GET", "/v1/blobs/"+sum(data)+"/meta", w, nil).decode(t, &meta)
	if meta != m {
		t.Fatalf("meta %+v, commit said %+v", meta, m)
	}
	// The upload is used up: committing again finds nothing, and the
	// upload's file is gone.
	wantError(t, s.do("POST", "/v1/blobs/uploads/"+d.UploadID+"/commit", w, nil), 404, "not_found", "")
	if s.uploadHeld(t, d.UploadID) {
		t.Fatal("the committed upload's bytes are still there")
	}
	// An empty blob is a blob.
	empty := s.uploadBlob("main", w, []byte{}, nil)
	if r := s.must(200, "GET", "/v1/blobs/"+empty.SHA256, w, nil); len(r.Body) != 0 || r.Header.Get("Content-Length") != "0" {
		t.Fatalf("empty blob: %q %v", r.Body, r.Header)
	}
}

// Commit verifies the declared size and SHA-256: a mismatch is 400 and the
// bytes are discarded; the upload may be sent again.
func TestBlobCommitMismatch(t *testing.T) {
	s := newTestServer(t)
	w, _ := s.newKey("agent", "namespace:main", "write", "read")
	data := []byte("the declared bytes")
	d := s.declare(201, "main", w, data, nil)

	other := []byte("other bytes, same length")[:len(data)]
	var got struct {
		Matches bool `json:"matches"`
	}
	s.must(200, "PUT", "/v1/blobs/uploads/"+d.UploadID, w, other).decode(t, &got)
	if got.Matches {
		t.Fatal("the upload says other bytes match")
	}
	wantError(t, s.do("POST", "/v1/blobs/uploads/"+d.UploadID+"/commit", w, nil), 400, "invalid_request", "sha256")
	if s.uploadHeld(t, d.UploadID) || s.bytesHeld(t, "main", sum(other)) || s.bytesHeld(t, "main", sum(data)) {
		t.Fatal("mismatched bytes were kept")
	}
	wantError(t, s.do("GET", "/v1/blobs/"+sum(data), w, nil), 404, "not_found", "")
	wantError(t, s.do("GET", "/v1/blobs/"+sum(other), w, nil), 404, "not_found", "")
	// Without bytes the commit says so.
	wantError(t, s.do("POST", "/v1/blobs/uploads/"+d.UploadID+"/commit", w, nil), 409, "invalid_state", "")

	// A wrong size is named as such.
	s.must(200, "PUT", "/v1/blobs/uploads/"+d.UploadID, w, append(bytes.Clone(data), '!'))
	wantError(t, s.do("POST", "/v1/blobs/uploads/"+d.UploadID+"/commit", w, nil), 400, "invalid_request", "size")

	// The right bytes, sent again to the same upload, commit.
	s.must(200, "PUT", "/v1/blobs/uploads/"+d.UploadID, w, data)
	s.must(200, "POST", "/v1/blobs/uploads/"+d.UploadID+"/commit", w, nil)
	if r := s.must(200, "GET", "/v1/blobs/"+sum(data), w, nil); !bytes.Equal(r.Body, data) {
		t.Fatalf("read %q", r.Body)
	}
}

// Declaring bytes the namespace holds answers exists at once for whoever
// may read them; the declarer is recorded as a reader.
func TestBlobDedupe(t *testing.T) {
	ctx := t.Context()
	s := newTestServer(t)
	a, _ := s.newKey("agent", "namespace:main", "write", "read")
	data := []byte("shared bytes")
	first := s.uploadBlob("main", a, data, map[string]any{"raw_policy": "namespace"})

	again := s.declare(200, "main", a, data, nil)
	if !again.Exists || again.Ref != first.Ref || again.UploadID != "" {
		t.Fatalf("re-declare by the uploader: %+v", again)
	}
	b, bID := s.newKey("agent", "namespace:main", "write", "read")
	if d := s.declare(200, "main", b, data, nil); !d.Exists || d.Ref != first.Ref {
		t.Fatalf("declare by another principal under the namespace policy: %+v", d)
	}
	// b is a reader now, so it keeps reading when the admin makes the
	// namespace private.
	s.must(200, "PUT", "/v1/admin/namespaces/main/settings", adminKey, map[string]any{"raw_policy": "private"})
	s.must(200, "GET", "/v1/blobs/"+first.SHA256, b, nil)
	c, _ := s.newKey("agent", "namespace:main", "read")
	wantError(t, s.do("GET", "/v1/blobs/"+first.SHA256, c, nil), 404, "not_found", "")
	err := s.DB.View(context.Background(), func(tx store.Tx) error {
		ok, err := tx.BlobReaderCheck(ctx, "main", first.SHA256, bID)
		if err == nil && !ok {
			err = errors.New("b is not recorded as a reader")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// Bytes the namespace holds cannot be declared with another size.
	wantError(t, s.do("POST", "/v1/blobs", a, map[string]any{"sha256": first.SHA256, "size": 3}), 400, "invalid_request", "size")
	// Dedupe is per namespace.
	if d := s.declare(201, "elsewhere", adminKey, data, nil); d.Exists {
		t.Fatalf("another namespace sees the bytes: %+v", d)
	}
}

// Under the private policy (the default) another principal's key gets 404
// for the bytes and the metadata, exactly as for bytes that never existed.
// The uploader's principal, through any of its keys, and admins read them.
// Another principal that sends the same bytes becomes a reader.
func TestBlobPrivatePolicy(t *testing.T) {
	s := newTestServer(t)
	a, aID := s.newKey("agent", "namespace:main", "write", "read")
	b, _ := s.newKey("agent", "namespace:main", "write", "read")
	data := []byte("private bytes")
	m := s.uploadBlob("main", a, data, nil)

	missing := sum([]byte("never uploaded"))
	for _, path := range []string{"/v1/blobs/%s", "/v1/blobs/%s/meta"} {
		hidden := s.do("GET", fmt.Sprintf(path, m.SHA256), b, nil)
		absent := s.do("GET", fmt.Sprintf(path, missing), b, nil)
		wantError(t, hidden, 404, "not_found", "")
		wantError(t, absent, 404, "not_found", "")
		if string(bytes.ReplaceAll(hidden.Body, []byte(m.SHA256), []byte(missing))) != string(absent.Body) {
			t.Fatalf("a hidden blob answers %s, a missing one %s", hidden.Body, absent.Body)
		}
	}
	s.must(200, "GET", "/v1/blobs/"+m.SHA256, adminKey, nil)
	// Another key of the uploader's principal.
	var k struct {
		Key string `json:"key"`
	}
	s.must(201, "POST", "/v1/admin/keys", adminKey, map[string]any{"principal_id": aID, "scopes": []string{"namespace:main", "read"}}).decode(t, &k)
	s.must(200, "GET", "/v1/blobs/"+m.SHA256, k.Key, nil)

	// Declaring the hash tells b nothing: it gets an upload like any other,
	// and must send the bytes (knowing a hash is not holding the bytes).
	d := s.declare(201, "main", b, data, nil)
	if d.Exists || d.UploadID == "" {
		t.Fatalf("declare of hidden bytes: %+v", d)
	}
	wantError(t, s.do("POST", "/v1/blobs/uploads/"+d.UploadID+"/commit", b, nil), 409, "invalid_state", "")
	wantError(t, s.do("GET", "/v1/blobs/"+m.SHA256, b, nil), 404, "not_found", "")
	s.must(200, "PUT", "/v1/blobs/uploads/"+d.UploadID, b, data)
	var bm blobMeta
	s.must(200, "POST", "/v1/blobs/uploads/"+d.UploadID+"/commit", b, nil).decode(t, &bm)
	if bm.Ref != m.Ref || bm.UploadedBy != aID {
		t.Fatalf("dedupe at commit: %+v", bm)
	}
	if r := s.must(200, "GET", "/v1/blobs/"+m.SHA256, b, nil); !bytes.Equal(r.Body, data) {
		t.Fatalf("b reads %q", r.Body)
	}
	// And from now on b's declarations answer exists at once.
	if d := s.declare(200, "main", b, data, nil); !d.Exists {
		t.Fatalf("b re-declares: %+v", d)
	}
}

// The first upload of a namespace sets its raw-blob policy; afterwards
// only an admin changes it, through the settings route.
func TestBlobRawPolicySettings(t *testing.T) {
	s := newTestServer(t)
	a, _ := s.newKey("agent", "namespace:team", "write", "read")
	b, _ := s.newKey("agent", "namespace:team", "read")
	var st tessera.NamespaceSettings
	s.must(200, "GET", "/v1/admin/namespaces/team/settings", adminKey, nil).decode(t, &st)
	if st.RawPolicy != "private" {
		t.Fatalf("default settings: %+v", st)
	}
	m := s.uploadBlob("team", a, []byte("team bytes"), map[string]any{"raw_policy": "namespace"})
	s.must(200, "GET", "/ns/team/v1/blobs/"+m.SHA256, b, nil)
	s.must(200, "GET", "/v1/admin/namespaces/team/settings", adminKey, nil).decode(t, &st)
	if st.RawPolicy != "namespace" || st.Namespace != "team" {
		t.Fatalf("settings after the first upload: %+v", st)
	}
	// A later upload cannot change it.
	wantError(t, s.do("POST", "/ns/team/v1/blobs", a, map[string]any{"sha256": sum([]byte("x")), "size": 1, "raw_policy": "private"}), 409, "invalid_state", "")
	s.declare(201, "team", a, []byte("x"), map[string]any{"raw_policy": "namespace"})
	wantError(t, s.do("POST", "/ns/team/v1/blobs", a, map[string]any{"sha256": sum([]byte("x")), "size": 1, "raw_policy": "public"}), 400, "invalid_request", "raw_policy")
	// Only an admin may.
	wantError(t, s.do("PUT", "/ns/team/v1/admin/namespaces/team/settings", a, map[string]any{"raw_policy": "private"}), 403, "forbidden", "")
	s.must(200, "PUT", "/v1/admin/namespaces/team/settings", adminKey, map[string]any{"raw_policy": "private"}).decode(t, &st)
	if st.RawPolicy != "private" {
		t.Fatalf("settings: %+v", st)
	}
	wantError(t, s.do("GET", "/ns/team/v1/blobs/"+m.SHA256, b, nil), 404, "not_found", "")
	s.must(200, "GET", "/ns/team/v1/blobs/"+m.SHA256, a, nil)
	wantError(t, s.do("PUT", "/v1/admin/namespaces/team/settings", adminKey, map[string]any{"raw_policy": "open"}), 400, "invalid_request", "raw_policy")
	wantError(t, s.do("PUT", "/v1/admin/namespaces/Bad_NS/settings", adminKey, map[string]any{"raw_policy": "private"}), 400, "invalid_request", "ns")
}

// Reads honour Range (206) and If-None-Match (304).
func TestBlobRangeAndETag(t *testing.T) {
	s := newTestServer(t)
	w, _ := s.newKey("agent", "namespace:main", "write", "read")
	data := []byte("0123456789abcdef")
	m := s.uploadBlob("main", w, data, nil)

	r := s.must(206, "GET", "/v1/blobs/"+m.SHA256, w, nil, "Range", "bytes=2-5")
	if string(r.Body) != "2345" || r.Header.Get("Content-Range") != "bytes 2-5/16" || r.Header.Get("Content-Length") != "4" {
		t.Fatalf("range: %q %v", r.Body, r.Header)
	}
	r = s.must(206, "GET", "/v1/blobs/"+m.SHA256, w, nil, "Range", "bytes=-3")
	if string(r.Body) != "def" {
		t.Fatalf("suffix range: %q", r.Body)
	}
	etag := s.must(200, "GET", "/v1/blobs/"+m.SHA256, w, nil).Header.Get("ETag")
	r = s.must(304, "GET", "/v1/blobs/"+m.SHA256, w, nil, "If-None-Match", etag)
	if len(r.Body) != 0 {
		t.Fatalf("304 with a body: %q", r.Body)
	}
	s.must(200, "GET", "/v1/blobs/"+m.SHA256, w, nil, "If-None-Match", `"something-else"`)
	s.must(416, "GET", "/v1/blobs/"+m.SHA256, w, nil, "Range", "bytes=100-200")
	// A Range that names an old ETag gets the whole, current bytes.
	s.must(200, "GET", "/v1/blobs/"+m.SHA256, w, nil, "Range", "bytes=0-1", "If-Range", `"old"`)
}

// streamed is a request body of n bytes that is never held in memory:
// byte i is i mod 251.
type streamed struct{ n, off int64 }

func (r *streamed) Read(p []byte) (int, error) {
	if r.off >= r.n {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), r.n-r.off)]
	for i := range p {
		p[i] = byte((r.off + int64(i)) % 251)
	}
	r.off += int64(len(p))
	return len(p), nil
}

func streamedSum(n int64) string {
	h := sha256.New()
	_, _ = io.Copy(h, &streamed{n: n})
	return hex.EncodeToString(h.Sum(nil))
}

// putStream uploads n streamed bytes; with chunked the body has no
// Content-Length, so only reading it can find it too large.
func (s *testServer) putStream(key, uploadID string, n int64, chunked bool) *response {
	s.t.Helper()
	var body io.Reader = &streamed{n: n}
	if chunked {
		body = io.MultiReader(body) // hides the length from net/http
	}
	req, err := http.NewRequest("PUT", s.URL+"/v1/blobs/uploads/"+uploadID, body)
	if err != nil {
		s.t.Fatal(err)
	}
	if !chunked {
		req.ContentLength = n
	}
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("PUT %d bytes: %v", n, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return &response{Status: res.StatusCode, Header: res.Header, Body: b}
}

// Uploads are bounded at 32 MiB (413 beyond, whether announced by
// Content-Length or found while streaming); JSON bodies stay at 1 MiB.
func TestBlobUploadLimit(t *testing.T) {
	s := newTestServer(t)
	w, _ := s.newKey("agent", "namespace:main", "write", "read")
	const limit = 32 << 20

	wantError(t, s.do("POST", "/v1/blobs", w, map[string]any{"sha256": sum(nil), "size": limit + 1}), 400, "invalid_request", "size")

	var d declared
	s.must(201, "POST", "/v1/blobs", w, map[string]any{"sha256": streamedSum(limit), "size": limit}).decode(t, &d)
	wantError(t, s.putStream(w, d.UploadID, limit+1, false), 413, "payload_too_large", "")
	wantError(t, s.putStream(w, d.UploadID, limit+1, true), 413, "payload_too_large", "")
	s.must(409, "POST", "/v1/blobs/uploads/"+d.UploadID+"/commit", w, nil)

	// Exactly the limit is accepted, streamed to disk and verified.
	var got struct {
		Size    int64 `json:"size"`
		Matches bool  `json:"matches"`
	}
	r := s.putStream(w, d.UploadID, limit, true)
	if r.Status != 200 {
		t.Fatalf("upload of the limit: %d %s", r.Status, r.Body)
	}
	r.decode(t, &got)
	if got.Size != limit || !got.Matches {
		t.Fatalf("upload of the limit: %+v", got)
	}
	var m blobMeta
	s.must(200, "POST", "/v1/blobs/uploads/"+d.UploadID+"/commit", w, nil).decode(t, &m)
	if m.Size != limit {
		t.Fatalf("commit: %+v", m)
	}
	// The 1 MiB rule still holds for every other route, the commit and
	// the declaration included.
	big := bytes.Repeat([]byte(" "), 1<<20+1)
	wantError(t, s.do("POST", "/v1/blobs/uploads/"+d.UploadID+"/commit", w, big), 413, "payload_too_large", "")
	wantError(t, s.do("POST", "/v1/blobs", w, big), 413, "payload_too_large", "")
}

// The operator's limit (--max-blob-bytes) is what the routes enforce.
func TestBlobUploadLimitConfigured(t *testing.T) {
	s := newTestServer(t, func(c *core.Config) { c.MaxBlobBytes = 1000 })
	w, _ := s.newKey("agent", "namespace:main", "write", "read")
	data := bytes.Repeat([]byte("z"), 1000)
	d := s.declare(201, "main", w, data, nil)
	if d.MaxBytes != 1000 {
		t.Fatalf("declare: %+v", d)
	}
	wantError(t, s.do("PUT", "/v1/blobs/uploads/"+d.UploadID, w, append(bytes.Clone(data), 'z')), 413, "payload_too_large", "")
	if s.uploadHeld(t, d.UploadID) {
		t.Fatal("a refused upload left its bytes")
	}
	s.must(200, "PUT", "/v1/blobs/uploads/"+d.UploadID, w, data)
	s.must(200, "POST", "/v1/blobs/uploads/"+d.UploadID+"/commit", w, nil)
}

// Malformed hashes, declarations and upload ids.
func TestBlobMalformed(t *testing.T) {
	s := newTestServer(t)
	w, _ := s.newKey("agent", "namespace:main", "write", "read")
	other, _ := s.newKey("agent", "namespace:main", "write", "read")
	good := sum([]byte("x"))
	for _, c := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"size": 1}, "sha256"},
		{map[string]any{"sha256": "abc", "size": 1}, "sha256"},
		{map[string]any{"sha256": good[:63] + "g", "size": 1}, "sha256"},
		{map[string]any{"sha256": good}, "size"},
		{map[string]any{"sha256": good, "size": -1}, "size"},
		{map[string]any{"sha256": good, "size": 1, "content_type": "not a type"}, "content_type"},
		{map[string]any{"sha256": good, "size": 1, "content_type": "text/plain\r\nX-Evil: 1"}, "content_type"},
		{map[string]any{"sha256": good, "size": 1, "bogus": true}, "bogus"},
	} {
		wantError(t, s.do("POST", "/v1/blobs", w, c.body), 400, "invalid_request", c.field)
	}
	wantError(t, s.do("GET", "/v1/blobs/nothex", w, nil), 400, "invalid_request", "sha256")
	wantError(t, s.do("GET", "/v1/blobs/"+good+"00/meta", w, nil), 400, "invalid_request", "sha256")
	wantError(t, s.do("PUT", "/v1/blobs/uploads/01ARZ3NDEKTSV4RRFFQ69G5FAV", w, "x"), 404, "not_found", "")
	wantError(t, s.do("PUT", "/v1/blobs/uploads/..", w, "x"), 400, "invalid_request", "path")
	wantError(t, s.do("POST", "/v1/blobs/uploads/nope/commit", w, nil), 404, "not_found", "")
	// An upload belongs to the principal that declared it.
	d := s.declare(201, "main", w, []byte("x"), nil)
	wantError(t, s.do("PUT", "/v1/blobs/uploads/"+d.UploadID, other, "x"), 404, "not_found", "")
	wantError(t, s.do("POST", "/v1/blobs/uploads/"+d.UploadID+"/commit", other, nil), 404, "not_found", "")
	// And to its namespace.
	wantError(t, s.do("PUT", "/ns/else/v1/blobs/uploads/"+d.UploadID, adminKey, "x"), 404, "not_found", "")
	// Content types are normalized; uppercase hex is accepted.
	var m blobMeta
	dd := s.declare(201, "main", w, []byte("y"), map[string]any{"content_type": "Text/Plain; Charset=UTF-8", "sha256": "SHA256:" + string(bytes.ToUpper([]byte(sum([]byte("y")))))})
	s.must(200, "PUT", "/v1/blobs/uploads/"+dd.UploadID, w, "y")
	s.must(200, "POST", "/v1/blobs/uploads/"+dd.UploadID+"/commit", w, nil).decode(t, &m)
	if m.ContentType != "text/plain; charset=UTF-8" || m.SHA256 != sum([]byte("y")) {
		t.Fatalf("normalized: %+v", m)
	}
	// Scopes: declaring needs write, reading needs read.
	ro, _ := s.newKey("agent", "namespace:main", "read")
	wantError(t, s.do("POST", "/v1/blobs", ro, map[string]any{"sha256": good, "size": 1}), 403, "forbidden", "")
	wantError(t, s.do("GET", "/v1/blobs/"+m.SHA256, other, nil), 404, "not_found", "")
}

// A blob declared under a lease names its run and task; a stale token is
// lease_lost.
func TestBlobUnderLease(t *testing.T) {
	s := newTestServer(t)
	producer, _ := s.newKey("service", "namespace:main", "enqueue", "read")
	worker, _ := s.newKey("agent", "namespace:main", "claim", "write", "read")
	task := s.enqueue("main", producer, map[string]any{"title": "render"})
	c := s.claim("main", worker, "default")

	m := s.uploadBlob("main", worker, []byte("rendered"), map[string]any{"lease_token": c.Lease.Token})
	if m.RunID != c.Lease.RunID || m.TaskID != task.ID {
		t.Fatalf("blob under a lease: %+v", m)
	}
	s.submit("main", worker, c, "succeeded")
	wantError(t, s.do("POST", "/v1/blobs", worker, map[string]any{"sha256": sum([]byte("z")), "size": 1, "lease_token": c.Lease.Token}), 409, "lease_lost", "")
}

// Idempotency-Key on the commit: a repeat answers as the first did.
func TestBlobIdempotentCommit(t *testing.T) {
	s := newTestServer(t)
	w, _ := s.newKey("agent", "namespace:main", "write", "read")
	data := []byte("commit once")
	d := s.declare(201, "main", w, data, nil)
	s.must(200, "PUT", "/v1/blobs/uploads/"+d.UploadID, w, data)
	first := s.must(200, "POST", "/v1/blobs/uploads/"+d.UploadID+"/commit", w, nil, "Idempotency-Key", "c-1")
	again := s.must(200, "POST", "/v1/blobs/uploads/"+d.UploadID+"/commit", w, nil, "Idempotency-Key", "c-1")
	if !bytes.Equal(first.Body, again.Body) {
		t.Fatalf("repeat %s, first %s", again.Body, first.Body)
	}
	d2 := s.declare(201, "main", w, []byte("another"), nil)
	wantError(t, s.do("POST", "/v1/blobs/uploads/"+d2.UploadID+"/commit", w, nil, "Idempotency-Key", "c-1"), 409, "idempotency_conflict", "")
}

// Uploads not committed within an hour are swept with their bytes.
func TestBlobSweep(t *testing.T) {
	ctx := t.Context()
	s := newTestServer(t)
	w, _ := s.newKey("agent", "namespace:main", "write", "read")
	data := []byte("abandoned")
	d := s.declare(201, "main", w, data, nil)
	s.must(200, "PUT", "/v1/blobs/uploads/"+d.UploadID, w, data)
	kept := s.declare(201, "main", w, []byte("fresh"), nil)

	s.Clock.Advance(59 * time.Minute)
	if n, err := s.Core.SweepUploads(context.Background()); err != nil || n != 0 {
		t.Fatalf("sweep before the hour: %d, %v", n, err)
	}
	s.Clock.Advance(2 * time.Minute)
	wantError(t, s.do("POST", "/v1/blobs/uploads/"+d.UploadID+"/commit", w, nil), 404, "not_found", "")
	n, err := s.Core.SweepUploads(context.Background())
	if err != nil || n != 2 {
		t.Fatalf("sweep: %d, %v", n, err)
	}
	if s.uploadHeld(t, d.UploadID) {
		t.Fatal("swept upload's bytes are still there")
	}
	err = s.DB.View(context.Background(), func(tx store.Tx) error {
		_, err := tx.UploadGet(ctx, "main", kept.UploadID)
		return err
	})
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("swept upload still stored: %v", err)
	}
	wantError(t, s.do("PUT", "/v1/blobs/uploads/"+d.UploadID, w, data), 404, "not_found", "")
}

// A crash between upload and commit leaves no blob and no metadata; the
// upload survives the restart and its commit works on the new server.
func TestBlobCrashBetweenUploadAndCommit(t *testing.T) {
	dir := t.TempDir()
	clock := tessera.NewManualClock(time.Now())
	s, stop := serverAt(t, dir, clock)
	w, _ := s.newKey("agent", "namespace:main", "write", "read")
	data := []byte("bytes in flight")
	d := s.declare(201, "main", w, data, nil)
	s.must(200, "PUT", "/v1/blobs/uploads/"+d.UploadID, w, data)
	stop()

	s, _ = serverAt(t, dir, clock)
	wantError(t, s.do("GET", "/v1/blobs/"+sum(data), w, nil), 404, "not_found", "")
	wantError(t, s.do("GET", "/v1/blobs/"+sum(data)+"/meta", w, nil), 404, "not_found", "")
	if blobStored(t, s.DB, "main", sum(data)) || s.bytesHeld(t, "main", sum(data)) {
		t.Fatal("an uncommitted upload is a blob after the restart")
	}
	s.must(200, "POST", "/v1/blobs/uploads/"+d.UploadID+"/commit", w, nil)
	if r := s.must(200, "GET", "/v1/blobs/"+sum(data), w, nil); !bytes.Equal(r.Body, data) {
		t.Fatalf("read after the restart: %q", r.Body)
	}
}

// A crash inside the commit, after the bytes reached their content address
// but before the metadata was stored, leaves bytes nobody can see. A retried
// commit completes; an abandoned one is swept with its upload.
func TestBlobCrashInsideCommit(t *testing.T) {
	dir := t.TempDir()
	clock := tessera.NewManualClock(time.Now())
	s, stop := serverAt(t, dir, clock)
	w, _ := s.newKey("agent", "namespace:main", "write", "read")
	retried, abandoned := []byte("retried commit"), []byte("abandoned commit")
	var ids []string
	for _, data := range [][]byte{retried, abandoned} {
		d := s.declare(201, "main", w, data, nil)
		s.must(200, "PUT", "/v1/blobs/uploads/"+d.UploadID, w, data)
		// The commit's first step, then the "crash".
		if err := s.Core.Blobs().Promote(t.Context(), d.UploadID, "main", sum(data), int64(len(data))); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, d.UploadID)
	}
	stop()

	s, _ = serverAt(t, dir, clock)
	for _, data := range [][]byte{retried, abandoned} {
		if !s.bytesHeld(t, "main", sum(data)) {
			t.Fatal("the simulated crash did not place the bytes")
		}
		wantError(t, s.do("GET", "/v1/blobs/"+sum(data), w, nil), 404, "not_found", "")
	}
	s.must(200, "POST", "/v1/blobs/uploads/"+ids[0]+"/commit", w, nil)
	s.must(200, "GET", "/v1/blobs/"+sum(retried), w, nil)

	clock.Advance(sweepAfter)
	if n, err := s.Core.SweepUploads(context.Background()); err != nil || n != 1 {
		t.Fatalf("sweep: %d, %v", n, err)
	}
	if s.bytesHeld(t, "main", sum(abandoned)) || s.uploadHeld(t, ids[1]) {
		t.Fatal("the abandoned commit's bytes survived the sweep")
	}
	if !s.bytesHeld(t, "main", sum(retried)) {
		t.Fatal("the sweep removed a committed blob's bytes")
	}
	s.must(200, "GET", "/v1/blobs/"+sum(retried), w, nil)
	if disk, ok := s.Core.Blobs().(*blobfs.FS); ok {
		if entries, err := os.ReadDir(filepath.Join(disk.Root(), "tmp")); err != nil || len(entries) != 0 {
			t.Fatalf("temporary files left: %v %v", entries, err)
		}
	}
}

// sweepAfter is the upload lifetime plus a minute.
const sweepAfter = core.UploadTTL + time.Minute

// The rows a whole blob upload costs (declare, bytes, commit), by the
// meter: the first in a namespace (which stores its raw policy), a later
// one, and a later one with an Idempotency-Key on the commit.
func TestBlobRowsWritten(t *testing.T) {
	// The exact figures are the SQLite meter's (SPEC §14's table).
	sqliteOnly(t)
	s := newTestServer(t)
	w, _ := s.newKey("agent", "namespace:main", "write", "read", "enqueue")
	s.enqueue("main", w, map[string]any{"title": "warm the namespace"})
	written := s.rowsWritten
	var calls [3]int64
	first := written(func() {
		d := s.declare(201, "main", w, []byte("first"), nil)
		calls[1] = written(func() { s.must(200, "PUT", "/v1/blobs/uploads/"+d.UploadID, w, "first") })
		calls[2] = written(func() { s.must(200, "POST", "/v1/blobs/uploads/"+d.UploadID+"/commit", w, nil) })
	})
	calls[0] = first - calls[1] - calls[2]
	later := written(func() { s.uploadBlob("main", w, []byte("later"), nil) })
	keyed := written(func() { s.uploadBlob("main", w, []byte("keyed"), nil, "Idempotency-Key", "k-1") })
	deduped := written(func() { s.declare(200, "main", w, []byte("later"), nil) })
	t.Logf("rows written: blob upload first in namespace %d (declare %d, bytes %d, commit %d), later %d, with Idempotency-Key %d, dedupe declare %d",
		first, calls[0], calls[1], calls[2], later, keyed, deduped)
	// Declare: the upload (and, first, the namespace's policy); bytes:
	// nothing; commit: the upload out, the blob in, the audit event; an
	// idempotency entry is a row and its index entry.
	if first > 5 || later > 4 || keyed > 6 || calls[1] != 0 || deduped != 0 {
		t.Fatalf("blob upload rows: first %d, later %d, keyed %d, bytes %d, dedupe %d", first, later, keyed, calls[1], deduped)
	}
}
