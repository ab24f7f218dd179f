package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/tessera-dev/tessera/internal/blobs3/s3test"
	"github.com/tessera-dev/tessera/internal/store/postgres/pgtest"
)

// uploadBlob sends data through a node's three upload calls and returns
// its hex SHA-256 once the commit is answered.
func uploadBlob(t *testing.T, s *server, data []byte) string {
	t.Helper()
	h := sha256.Sum256(data)
	sum := hex.EncodeToString(h[:])
	var decl struct {
		UploadID string `json:"upload_id"`
	}
	s.must(201, "POST", "/v1/blobs", crashAdminKey, map[string]any{"sha256": sum, "size": len(data), "content_type": "application/octet-stream"}, &decl)
	if status, body := rawRequest(t, s, "PUT", "/v1/blobs/uploads/"+decl.UploadID, bytes.NewReader(data), ""); status != 200 {
		t.Fatalf("upload: %d %s", status, body)
	}
	s.must(200, "POST", "/v1/blobs/uploads/"+decl.UploadID+"/commit", crashAdminKey, nil, nil)
	return sum
}

// rawRequest sends a request with a raw body (and a Range header, if
// given) and returns the status and body.
func rawRequest(t *testing.T, s *server, method, path string, body io.Reader, rng string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+crashAdminKey)
	if rng != "" {
		req.Header.Set("Range", rng)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, b
}

// Blob bytes live where every node reads them — the database the nodes
// share, or an S3-compatible object store (a real SeaweedFS): a blob
// uploaded through node A reads whole, and by range, through node B —
// also once A has been killed (its answer to the commit was the promise).
func TestNodesServeEachOthersBlobs(t *testing.T) {
	bin := buildTessera(t)
	for _, bytesIn := range []string{"postgres", "s3"} {
		t.Run(bytesIn, func(t *testing.T) {
			url := pgtest.Schema(t)
			var env []string
			if bytesIn == "s3" {
				env = append(s3test.Env(), "TESSERA_BLOBS="+s3test.Start(t).URL("nodes"))
			}
			nodes := startNodes(t, bin, url, 2, env...)
			data := bytes.Repeat([]byte("0123456789abcdef"), 40000) // 640,000 bytes: three chunks in PostgreSQL
			sum := uploadBlob(t, nodes[0], data)
			nodes[0].kill()
			if status, got := rawRequest(t, nodes[1], "GET", "/v1/blobs/"+sum, nil, ""); status != 200 || !bytes.Equal(got, data) {
				t.Fatalf("read on node B: %d, %d bytes of %d", status, len(got), len(data))
			}
			if status, got := rawRequest(t, nodes[1], "GET", "/v1/blobs/"+sum, nil, "bytes=262140-262150"); status != 206 || !bytes.Equal(got, data[262140:262151]) {
				t.Fatalf("range across a chunk's end on node B: %d %q", status, got)
			}
		})
	}
}

// An object store that stops answering: reads and uploads answer 503
// unavailable saying so and to retry, never 500; the metadata stays
// readable.
func TestObjectStoreDownAnswersUnavailable(t *testing.T) {
	bin := buildTessera(t)
	s3 := s3test.Start(t)
	env := append(s3test.Env(), "TESSERA_ADMIN_KEY="+crashAdminKey, "TESSERA_BLOBS="+s3.URL("down"))
	node := startServer(t, bin, t.TempDir(), env...)
	data := []byte("bytes in an object store that will stop")
	sum := uploadBlob(t, node, data)
	s3.Stop()
	status, body := rawRequest(t, node, "GET", "/v1/blobs/"+sum, nil, "")
	if e := apiError(t, body); status != 503 || e.Code != "unavailable" || !strings.Contains(e.Message, "object store did not answer") {
		t.Fatalf("read with the object store down: %d %s", status, body)
	}
	var decl struct {
		UploadID string `json:"upload_id"`
	}
	node.must(201, "POST", "/v1/blobs", crashAdminKey, map[string]any{"sha256": strings.Repeat("0", 64), "size": 3}, &decl)
	if status, body := rawRequest(t, node, "PUT", "/v1/blobs/uploads/"+decl.UploadID, strings.NewReader("abc"), ""); status != 503 || apiError(t, body).Code != "unavailable" {
		t.Fatalf("upload with the object store down: %d %s", status, body)
	}
	node.must(200, "GET", "/v1/blobs/"+sum+"/meta", crashAdminKey, nil, nil)
}

type apiErr struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func apiError(t *testing.T, body []byte) apiErr {
	t.Helper()
	var e struct {
		Error apiErr `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("not an error body: %s", body)
	}
	return e.Error
}

// A node that kept blob bytes on its disk (--blobs local) before the
// deployment kept them where every node reads them: another node answers
// 503 saying what to do, `tessera admin blobs migrate` moves them (into
// the database, or an object store), and then every node reads them. A
// second run finds them there.
func TestBlobsMigrate(t *testing.T) {
	bin := buildTessera(t)
	for _, bytesIn := range []string{"postgres", "s3"} {
		t.Run(bytesIn, func(t *testing.T) {
			url := pgtest.Schema(t)
			dir := t.TempDir()
			env := []string{"TESSERA_STORE=" + url, "TESSERA_ADMIN_KEY=" + crashAdminKey}
			local := startServer(t, bin, dir, append(env, "TESSERA_BLOBS=local")...)
			data := []byte("bytes a node kept on its own disk")
			sum := uploadBlob(t, local, data)
			local.kill()

			migrateArgs := []string{"admin", "blobs", "migrate", "--data", dir, "--store", url}
			if bytesIn == "s3" {
				to := s3test.Start(t).URL("migrated")
				env = append(append(env, s3test.Env()...), "TESSERA_BLOBS="+to)
				migrateArgs = append(migrateArgs, "--blobs", to)
			}
			shared := startServer(t, bin, t.TempDir(), env...)
			status, body := rawRequest(t, shared, "GET", "/v1/blobs/"+sum, nil, "")
			if e := apiError(t, body); status != 503 || e.Code != "unavailable" || !strings.Contains(e.Message, "tessera admin blobs migrate") {
				t.Fatalf("bytes on another node's disk: %d %s, want 503 unavailable naming the migration", status, body)
			}

			migrate := func() string {
				t.Helper()
				out, err := exec.Command(bin, migrateArgs...).CombinedOutput()
				if err != nil {
					t.Fatalf("migrate: %v\n%s", err, out)
				}
				return string(out)
			}
			if out := migrate(); !strings.Contains(out, "1 moved, 0 already there, 0 named by no blob") {
				t.Fatalf("migrate said:\n%s", out)
			}
			if status, got := rawRequest(t, shared, "GET", "/v1/blobs/"+sum, nil, ""); status != 200 || !bytes.Equal(got, data) {
				t.Fatalf("read after the migration: %d %q", status, got)
			}
			if out := migrate(); !strings.Contains(out, "0 moved, 1 already there") {
				t.Fatalf("a second migrate said:\n%s", out)
			}
		})
	}
}
