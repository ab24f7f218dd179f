package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// DeclareBlob declares an upload (POST /v1/blobs): the answer is an upload
// to send the bytes to, or Exists when the namespace holds them already.
func (c *Client) DeclareBlob(ctx context.Context, req DeclareBlobRequest) (*BlobDeclared, error) {
	var out BlobDeclared
	_, err := c.do(ctx, &request{method: "POST", path: "/blobs", body: req}, &out)
	return result(&out, err)
}

// UploadBlobBytes sends a declared upload's bytes
// (PUT /v1/blobs/uploads/{id}); sending them again replaces them.
func (c *Client) UploadBlobBytes(ctx context.Context, uploadID string, data []byte) (*UploadReceived, error) {
	var out UploadReceived
	_, err := c.do(ctx, &request{method: "PUT", path: "/blobs/uploads/" + url.PathEscape(uploadID),
		raw: data, contentType: "application/octet-stream", safe: true}, &out)
	return result(&out, err)
}

// CommitBlob verifies and commits an upload
// (POST /v1/blobs/uploads/{id}/commit), always with an Idempotency-Key.
func (c *Client) CommitBlob(ctx context.Context, uploadID, idempotencyKey string) (*BlobInfo, error) {
	var out BlobInfo
	_, err := c.do(ctx, &request{method: "POST", path: "/blobs/uploads/" + url.PathEscape(uploadID) + "/commit",
		idempotencyKey: keyed(idempotencyKey), safe: true}, &out)
	return result(&out, err)
}

// PutBlob stores data as a blob in the three calls of the API and returns
// its ref ("sha256:<hex>"). A leaseToken binds it to that lease's run.
// The bytes are held in memory; blobs are at most 32 MiB by default.
func (c *Client) PutBlob(ctx context.Context, data []byte, contentType, leaseToken string) (string, error) {
	sum := sha256.Sum256(data)
	hexSum := hex.EncodeToString(sum[:])
	d, err := c.DeclareBlob(ctx, DeclareBlobRequest{SHA256: hexSum, Size: int64(len(data)), ContentType: contentType, LeaseToken: leaseToken})
	if err != nil {
		return "", err
	}
	if d.Exists {
		return d.Ref, nil
	}
	got, err := c.UploadBlobBytes(ctx, d.UploadID, data)
	if err != nil {
		return "", err
	}
	if !got.Matches {
		return "", fmt.Errorf("upload %s: the server received other bytes (sha256 %s)", d.UploadID, got.SHA256)
	}
	info, err := c.CommitBlob(ctx, d.UploadID, "")
	if err != nil {
		return "", err
	}
	return info.Ref, nil
}

// GetBlob streams a blob's bytes to w (GET /v1/blobs/{sha256}); sum is
// the hex SHA-256 or the sha256:<hex> ref. It returns the bytes written.
func (c *Client) GetBlob(ctx context.Context, sum string, w io.Writer) (int64, error) {
	rep, err := c.do(ctx, &request{method: "GET", path: "/blobs/" + url.PathEscape(sum),
		header: http.Header{"Accept": {"*/*"}}, safe: true, stream: w}, nil)
	if rep == nil {
		return 0, err
	}
	return rep.streamed, err
}

// BlobMeta returns a blob's metadata (GET /v1/blobs/{sha256}/meta).
func (c *Client) BlobMeta(ctx context.Context, sum string) (*BlobInfo, error) {
	var out BlobInfo
	_, err := c.do(ctx, &request{method: "GET", path: "/blobs/" + url.PathEscape(sum) + "/meta", safe: true}, &out)
	return result(&out, err)
}
