// Package blobs3 keeps blob bytes in an S3-compatible object store, where
// every node of a deployment reads them: the blobs.Bytes for deployments
// whose blobs outgrow the database.
//
// Layout under the URL's prefix, in one bucket:
//
//	uploads/<upload id>            received bytes, awaiting commit
//	ns/<namespace>/sha256/<hex>    committed bytes, content-addressed
//
// Received bytes pass through an unlinked temporary file, so the object
// store gets one PUT of a known length carrying the sum computed on the
// way (as x-amz-meta-sha256), and no blob is held in memory. The commit
// verifies that sum and size against the declaration and copies the
// object inside the store (conditional on the ETag it verified, so bytes
// replaced meanwhile are never promoted). Every object is written whole by
// one PUT or copy, so a crash leaves an object whole or absent; what it
// leaves unpromoted under uploads/ is swept by age.
package blobs3

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/tessera-dev/tessera/internal/blobs"
)

var _ blobs.Bytes = (*Store)(nil)

// Store is a blob byte store in one bucket under one prefix.
type Store struct {
	client         *minio.Client
	bucket, prefix string
	where          string
}

// sumMeta is the user metadata that carries received bytes' SHA-256.
const sumMeta = "Sha256"

// Open connects to the store rawURL names,
// s3://bucket[/prefix]?endpoint=URL&region=R: endpoint is the object
// store's base URL (http:// or https://; default https://s3.amazonaws.com),
// region its region (default: asked of the store). Credentials come from
// the environment as the AWS tools take them (AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY, ~/.aws/credentials, an instance role), never from
// the URL, which is logged. The bucket must exist.
func Open(ctx context.Context, rawURL string) (*Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "s3" || u.Host == "" || u.User != nil {
		return nil, fmt.Errorf("--blobs %q: want s3://bucket/prefix?endpoint=http(s)://host:port (credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)", rawURL)
	}
	q := u.Query()
	endpoint, err := url.Parse(cmp.Or(q.Get("endpoint"), "https://s3.amazonaws.com"))
	if err != nil || (endpoint.Scheme != "http" && endpoint.Scheme != "https") || endpoint.Host == "" {
		return nil, fmt.Errorf("--blobs %q: endpoint %q: want http(s)://host[:port]", rawURL, q.Get("endpoint"))
	}
	creds := credentials.NewChainCredentials([]credentials.Provider{
		&credentials.EnvAWS{},
		&credentials.FileAWSCredentials{},
		&credentials.IAM{},
	})
	client, err := minio.New(endpoint.Host, &minio.Options{Creds: creds, Secure: endpoint.Scheme == "https", Region: q.Get("region"),
		// Three tries, not ten: a store that does not answer is the
		// client's 503 in about a second, not a request held for many.
		MaxRetries: 3})
	if err != nil {
		return nil, fmt.Errorf("blobs3: %w", err)
	}
	s := &Store{client: client, bucket: u.Host, prefix: strings.Trim(u.Path, "/")}
	if s.prefix != "" {
		s.prefix += "/"
	}
	s.where = fmt.Sprintf("s3://%s/%s at %s", s.bucket, s.prefix, endpoint.Redacted())
	ok, err := client.BucketExists(ctx, s.bucket)
	if err != nil {
		return nil, fmt.Errorf("blobs3: %s: %w", s.where, err)
	}
	if !ok {
		return nil, fmt.Errorf("blobs3: bucket %q does not exist at %s: create it first", s.bucket, endpoint.Redacted())
	}
	return s, nil
}

// Where names the bucket, the prefix and the endpoint.
func (s *Store) Where() string { return s.where }

func (s *Store) uploadKey(id string) string { return s.prefix + "uploads/" + id }
func (s *Store) nsPrefix(ns string) string  { return s.prefix + "ns/" + ns + "/sha256/" }
func (s *Store) blobKey(ns, sum string) string {
	return s.nsPrefix(ns) + sum
}

// fault marks a failure of the object store to answer as
// blobs.ErrUnavailable: a transport error or a 5xx (SlowDown,
// ServiceUnavailable, InternalError) may pass; a 4xx is a fault here.
func fault(op string, err error) error {
	if err == nil {
		return nil
	}
	if r := minio.ToErrorResponse(err); r.StatusCode >= 400 && r.StatusCode < 500 {
		return fmt.Errorf("blobs3: %s: %w", op, err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("blobs3: %s: %w", op, err)
	}
	return fmt.Errorf("blobs3: %s: %w: %w", op, blobs.ErrUnavailable, err)
}

func notFound(err error) bool {
	code := minio.ToErrorResponse(err).Code
	return code == minio.NoSuchKey || code == "NotFound"
}

// Receive spools the bytes to an unlinked temporary file while hashing
// them, then PUTs them whole under uploads/.
func (s *Store) Receive(ctx context.Context, id string, r io.Reader, limit int64) (blobs.Received, error) {
	if !blobs.ValidName(id) {
		return blobs.Received{}, fmt.Errorf("blobs3: bad upload id %q", id)
	}
	spool, err := os.CreateTemp("", "tessera-upload-*")
	if err != nil {
		return blobs.Received{}, fmt.Errorf("blobs3: spooling an upload: %w", err)
	}
	defer spool.Close()
	// Unlinked at once: the bytes go when the file closes, crash or not.
	if err := os.Remove(spool.Name()); err != nil {
		return blobs.Received{}, fmt.Errorf("blobs3: spooling an upload: %w", err)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(spool, h), io.LimitReader(blobs.Tagged(r), limit+1))
	if err != nil {
		return blobs.Received{}, err
	}
	if n > limit {
		return blobs.Received{}, blobs.ErrTooLarge
	}
	got := blobs.Received{Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return blobs.Received{}, fmt.Errorf("blobs3: %w", err)
	}
	_, err = s.client.PutObject(ctx, s.bucket, s.uploadKey(id), spool, n, minio.PutObjectOptions{
		ContentType:  "application/octet-stream",
		UserMetadata: map[string]string{sumMeta: got.SHA256},
		// One PUT up to 5 GiB: a crash never leaves a multipart upload
		// behind, and nothing is buffered but the signer's chunks.
		DisableMultipart: n <= 5<<30,
	})
	if err != nil {
		return blobs.Received{}, fault("storing upload "+id, err)
	}
	return got, nil
}

// Promote checks the upload's recorded sum and size and copies it to its
// content address, unless the namespace holds those bytes already.
func (s *Store) Promote(ctx context.Context, id, ns, sum string, size int64) error {
	if err := blobs.CheckNames(ns, sum); err != nil {
		return err
	}
	if !blobs.ValidName(id) {
		return blobs.ErrNoUpload
	}
	up, err := s.client.StatObject(ctx, s.bucket, s.uploadKey(id), minio.StatObjectOptions{})
	if notFound(err) {
		return blobs.ErrNoUpload
	}
	if err != nil {
		return fault("reading upload "+id, err)
	}
	if got := up.UserMetadata[sumMeta]; got != sum || up.Size != size {
		if err := s.Discard(ctx, id); err != nil {
			return err
		}
		return &blobs.MismatchError{Size: up.Size, SHA256: got}
	}
	switch _, err := s.client.StatObject(ctx, s.bucket, s.blobKey(ns, sum), minio.StatObjectOptions{}); {
	case err == nil:
		return nil // the namespace holds these bytes already
	case !notFound(err):
		return fault("reading blob "+sum, err)
	}
	_, err = s.client.CopyObject(ctx,
		minio.CopyDestOptions{Bucket: s.bucket, Object: s.blobKey(ns, sum)},
		minio.CopySrcOptions{Bucket: s.bucket, Object: s.uploadKey(id), MatchETag: up.ETag})
	if code := minio.ToErrorResponse(err).Code; code == "PreconditionFailed" || notFound(err) {
		// Bytes sent again (or discarded) since they were verified:
		// verify what is there now.
		return s.Promote(ctx, id, ns, sum, size)
	}
	return fault("promoting upload "+id, err)
}

// Discard deletes the upload's object, if any.
func (s *Store) Discard(ctx context.Context, id string) error {
	if !blobs.ValidName(id) {
		return nil
	}
	return fault("discarding upload "+id, s.client.RemoveObject(ctx, s.bucket, s.uploadKey(id), minio.RemoveObjectOptions{}))
}

// Open opens the object at the content address; it reads with ranged GETs
// from wherever the reader seeks.
func (s *Store) Open(ctx context.Context, ns, sum string) (io.ReadSeekCloser, error) {
	if err := blobs.CheckNames(ns, sum); err != nil {
		return nil, err
	}
	obj, err := s.client.GetObject(ctx, s.bucket, s.blobKey(ns, sum), minio.GetObjectOptions{})
	if err != nil {
		return nil, fault("opening blob "+sum, err)
	}
	if _, err := obj.Stat(); err != nil {
		obj.Close()
		if notFound(err) {
			return nil, blobs.ErrMissing
		}
		return nil, fault("opening blob "+sum, err)
	}
	return obj, nil
}

// Remove deletes the object at the content address, if any.
func (s *Store) Remove(ctx context.Context, ns, sum string) error {
	if err := blobs.CheckNames(ns, sum); err != nil {
		return err
	}
	return fault("removing blob "+sum, s.client.RemoveObject(ctx, s.bucket, s.blobKey(ns, sum), minio.RemoveObjectOptions{}))
}

// RemoveNamespace deletes every object under the namespace's prefix.
func (s *Store) RemoveNamespace(ctx context.Context, ns string) error {
	if !blobs.ValidName(ns) {
		return fmt.Errorf("blobs3: bad namespace %q", ns)
	}
	_, err := s.removeListed(ctx, s.nsPrefix(ns), func(minio.ObjectInfo) bool { return true })
	return err
}

// Sweep deletes upload objects last written more than maxAge ago.
func (s *Store) Sweep(ctx context.Context, maxAge time.Duration) (int, error) {
	cutoff := time.Now().Add(-maxAge)
	return s.removeListed(ctx, s.prefix+"uploads/", func(o minio.ObjectInfo) bool { return o.LastModified.Before(cutoff) })
}

// removeListed deletes the objects under prefix that match, and counts
// them.
func (s *Store) removeListed(ctx context.Context, prefix string, match func(minio.ObjectInfo) bool) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	doomed := make(chan minio.ObjectInfo)
	var listErr error
	n := 0
	go func() {
		defer close(doomed)
		for o := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
			if o.Err != nil {
				listErr = o.Err
				return
			}
			if match(o) {
				n++
				select {
				case doomed <- o:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	for e := range s.client.RemoveObjects(ctx, s.bucket, doomed, minio.RemoveObjectsOptions{}) {
		if e.Err != nil && !notFound(e.Err) {
			cancel()
			for range doomed { // let the lister end
			}
			return 0, fault("removing "+e.ObjectName, e.Err)
		}
	}
	if listErr != nil {
		return 0, fault("listing "+prefix, listErr)
	}
	return n, nil
}
