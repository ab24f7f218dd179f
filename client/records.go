package client

import (
	"context"
	"net/url"
	"strconv"
)

func recordPath(bucket, key string) string {
	return "/records/" + url.PathEscape(bucket) + "/" + url.PathEscape(key)
}

// PutRecord writes the next version of bucket/key (PUT /v1/records/{bucket}/{key}),
// always with an Idempotency-Key. The answer carries the version's
// metadata, not its value.
func (c *Client) PutRecord(ctx context.Context, bucket, key string, req PutRecordRequest) (*Record, error) {
	var out Record
	_, err := c.do(ctx, &request{method: "PUT", path: recordPath(bucket, key), body: req,
		idempotencyKey: keyed(req.IdempotencyKey), safe: true}, &out)
	return result(&out, err)
}

// GetRecord reads a record's head, or version when it is not 0.
func (c *Client) GetRecord(ctx context.Context, bucket, key string, version int64) (*Record, error) {
	q := url.Values{}
	if version != 0 {
		q.Set("version", strconv.FormatInt(version, 10))
	}
	var out Record
	_, err := c.do(ctx, &request{method: "GET", path: recordPath(bucket, key), query: q, safe: true}, &out)
	return result(&out, err)
}

// RecordVersions lists a record's versions, newest first.
func (c *Client) RecordVersions(ctx context.Context, bucket, key string, p Page) (*VersionPage, error) {
	var out VersionPage
	_, err := c.do(ctx, &request{method: "GET", path: recordPath(bucket, key) + "/versions", query: pageQuery(p), safe: true}, &out)
	return result(&out, err)
}

// ListRecords lists the heads of a bucket's records by key, optionally
// only the keys starting with prefix.
func (c *Client) ListRecords(ctx context.Context, bucket, prefix string, p Page) (*RecordPage, error) {
	q := pageQuery(p)
	set(q, "prefix", prefix)
	var out RecordPage
	_, err := c.do(ctx, &request{method: "GET", path: "/records/" + url.PathEscape(bucket), query: q, safe: true}, &out)
	return result(&out, err)
}

// PutBucket creates a bucket or replaces its settings (PUT /v1/buckets/{bucket}).
func (c *Client) PutBucket(ctx context.Context, bucket string, public bool) (*Bucket, error) {
	var out Bucket
	_, err := c.do(ctx, &request{method: "PUT", path: "/buckets/" + url.PathEscape(bucket),
		body: map[string]bool{"public": public}, safe: true}, &out)
	return result(&out, err)
}

// ListBuckets lists buckets by name.
func (c *Client) ListBuckets(ctx context.Context, p Page) (*BucketPage, error) {
	var out BucketPage
	_, err := c.do(ctx, &request{method: "GET", path: "/buckets", query: pageQuery(p), safe: true}, &out)
	return result(&out, err)
}
