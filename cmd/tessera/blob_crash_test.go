package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"testing"
)

// kill -9 between the byte upload and the commit leaves no visible blob and
// no metadata; after the restart the declared upload can still be
// committed, and then the bytes read back whole (SPEC §7).
func TestKill9BetweenUploadAndCommit(t *testing.T) {
	bin := buildTessera(t)
	dir := t.TempDir()
	env := "TESSERA_ADMIN_KEY=" + crashAdminKey
	s := startServer(t, bin, dir, env)

	data := bytes.Repeat([]byte("tessera blob bytes "), 4096)
	sum := sha256.Sum256(data)
	hexSum := hex.EncodeToString(sum[:])
	var decl struct {
		UploadID string `json:"upload_id"`
	}
	s.must(201, "POST", "/v1/blobs", crashAdminKey,
		map[string]any{"sha256": hexSum, "size": len(data), "content_type": "text/plain"}, &decl)
	req, err := http.NewRequest("PUT", s.url+"/v1/blobs/uploads/"+decl.UploadID, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+crashAdminKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("upload: %d", res.StatusCode)
	}
	s.kill()

	s = startServer(t, bin, dir, env)
	if status, body, err := s.call("GET", "/v1/blobs/"+hexSum+"/meta", crashAdminKey, nil); err != nil || status != 404 {
		t.Fatalf("uncommitted blob after kill -9: %d %s %v", status, body, err)
	}
	if status, _, err := s.call("GET", "/v1/blobs/"+hexSum, crashAdminKey, nil); err != nil || status != 404 {
		t.Fatalf("uncommitted bytes readable after kill -9: %d %v", status, err)
	}
	s.must(200, "POST", "/v1/blobs/uploads/"+decl.UploadID+"/commit", crashAdminKey, nil, nil)
	req, _ = http.NewRequest("GET", s.url+"/v1/blobs/"+hexSum, nil)
	req.Header.Set("Authorization", "Bearer "+crashAdminKey)
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var got bytes.Buffer
	if _, err := got.ReadFrom(res.Body); err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 || !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("committed blob after restart: %d, %d bytes", res.StatusCode, got.Len())
	}
}
