package core

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// Record bounds (SPEC §3.6).
const (
	// MaxValueLen bounds a record value, measured compacted.
	MaxValueLen = 256 << 10
	MaxKeyLen   = 256
)

// PutRecordParams is the body of PUT /v1/records/{bucket}/{key}.
type PutRecordParams struct {
	Value json.RawMessage `json:"value"`
	// IfVersion makes the write conditional: it succeeds only if the head
	// is this version (0: only if the record does not exist yet).
	IfVersion *int64 `json:"if_version,omitempty"`
	// LeaseToken binds the new version to the run and task of that lease.
	LeaseToken string `json:"lease_token,omitempty"`
}

func (p *PutRecordParams) value() (json.RawMessage, error) {
	if p.Value == nil {
		return nil, tessera.Invalid("value", "value is required (any JSON value)")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, p.Value); err != nil {
		return nil, tessera.Invalid("value", "value is not valid JSON")
	}
	return buf.Bytes(), nil
}

// PutRecord writes version n+1 of bucket/key (version 1 for a new record)
// in one transaction: lease check, version check, bucket, head and
// version. The answer is the new version without its value. With an
// idempotency key, a repeat returns the first answer without writing.
func (s *Service) PutRecord(ctx context.Context, a *auth.Actor, ns, bucket, key string, p PutRecordParams, idemKey string) (*tessera.Record, error) {
	value, err := p.value()
	if err != nil {
		return nil, err
	}
	if a, err = s.authorize(ctx, a, ns, ActRecordWrite); err != nil {
		return nil, err
	}
	var out tessera.Record
	replayed := false
	err = s.auditedCreate(ctx, a, ns, ActRecordWrite, func(tx store.Tx, ev *tessera.AuditEvent) (err error) {
		ev.Target = bucket + "/" + key
		e := store.Idempotency{Namespace: ns, PrincipalID: a.Principal.ID, Route: "record:" + bucket + "/" + key, Key: idemKey, CreatedAt: s.clock.Now()}
		replayed, err = idempotent(ctx, tx, ev, e, p, &out, func() error {
			now := s.clock.Now()
			rec := tessera.Record{Namespace: ns, Bucket: bucket, Key: key, Value: value, WrittenBy: a.Principal.ID, CreatedAt: now}
			if p.LeaseToken != "" {
				task, err := leaseByToken(ctx, tx, ns, p.LeaseToken, now)
				if err != nil {
					return err
				}
				rec.RunID, rec.TaskID = task.Lease.RunID, task.ID
				ev.RunID = rec.RunID
			}
			head, err := tx.RecordHead(ctx, ns, bucket, key)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
			if p.IfVersion != nil && *p.IfVersion != head {
				if head == 0 {
					return tessera.Errorf(tessera.CodeVersionConflict, "record %s/%s does not exist, not at version %d", bucket, key, *p.IfVersion)
				}
				return tessera.Errorf(tessera.CodeVersionConflict, "record %s/%s is at version %d, not %d", bucket, key, head, *p.IfVersion)
			}
			// Writing a record creates its bucket (private) on first use; a
			// write to a public bucket is public activity.
			switch b, err := tx.BucketGet(ctx, ns, bucket); {
			case errors.Is(err, store.ErrNotFound):
				if err := tx.BucketEnsure(ctx, ns, bucket, now); err != nil {
					return err
				}
			case err != nil:
				return err
			default:
				ev.Public = b.Public
			}
			rec.Version = head + 1
			if err := tx.RecordPut(ctx, &rec, head); err != nil {
				if errors.Is(err, store.ErrConflict) {
					if p.IfVersion != nil {
						return tessera.Errorf(tessera.CodeVersionConflict, "record %s/%s changed during the write; read it and retry", bucket, key)
					}
					// An unconditional write raced another: write over
					// the new head, as if it had come second.
					return fmt.Errorf("record %s/%s: %w", bucket, key, store.ErrRetry)
				}
				return err
			}
			out = rec
			out.Value = nil
			if out.Version == 1 {
				ev.Status = 201
			}
			return nil
		})
		return err
	})
	if err = s.noticeLapse(ctx, ns, p.LeaseToken, err); err != nil {
		return nil, err
	}
	s.countReplay(replayed, a, ns, ActRecordWrite)
	return &out, nil
}

// GetRecord returns the head of bucket/key, or version when it is > 0.
func (s *Service) GetRecord(ctx context.Context, a *auth.Actor, ns, bucket, key string, version int64) (*tessera.Record, error) {
	if version < 0 {
		return nil, tessera.Invalid("version", "version must be ≥ 1")
	}
	a, err := s.authorize(ctx, a, ns, ActRecordRead)
	if err != nil {
		return nil, err
	}
	var rec *tessera.Record
	err = s.auditedRead(ctx, a, ns, ActRecordRead, func(tx store.Tx, ev *tessera.AuditEvent) error {
		ev.Target = bucket + "/" + key
		var err error
		rec, err = tx.RecordGet(ctx, ns, bucket, key, version)
		if errors.Is(err, store.ErrNotFound) && version > 0 {
			return tessera.Errorf(tessera.CodeNotFound, "record %s/%s has no version %d", bucket, key, version)
		}
		if err == nil {
			// Reading an execution record names its run (SPEC §9).
			ev.RunID = rec.RunID
		}
		return notFound(err, "record", bucket+"/"+key)
	})
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// RecordPage is one page of record heads, ordered by key.
type RecordPage struct {
	Records    []tessera.Record `json:"records"`
	NextCursor string           `json:"next_cursor,omitempty"`
}

// VersionPage is one page of a record's versions, newest first.
type VersionPage struct {
	Versions   []tessera.Record `json:"versions"`
	NextCursor string           `json:"next_cursor,omitempty"`
}

// BucketPage is one page of buckets, ordered by name.
type BucketPage struct {
	Buckets    []tessera.Bucket `json:"buckets"`
	NextCursor string           `json:"next_cursor,omitempty"`
}

// cutPage keeps at most limit records of recs (which holds up to limit+1)
// and stops where the store stopped for the byte budget. It reports
// whether more records follow.
func cutPage(recs []tessera.Record, limit int) ([]tessera.Record, bool) {
	n, more := store.CutPage(len(recs), limit, func(i int) int { return len(recs[i].Value) })
	return recs[:n], more
}

// RecordVersions lists the versions of bucket/key, newest first.
func (s *Service) RecordVersions(ctx context.Context, a *auth.Actor, ns, bucket, key, cursor string, limit int) (*VersionPage, error) {
	pos, limit, err := pageParams(cursor, limit)
	if err != nil {
		return nil, err
	}
	var before int64
	if pos != "" {
		if before, err = strconv.ParseInt(pos, 10, 64); err != nil || before < 1 {
			return nil, tessera.Invalid("cursor", "cursor is not one this server issued")
		}
	}
	if a, err = s.authorize(ctx, a, ns, ActRecordHistory); err != nil {
		return nil, err
	}
	page := &VersionPage{Versions: []tessera.Record{}}
	err = s.auditedRead(ctx, a, ns, ActRecordHistory, func(tx store.Tx, ev *tessera.AuditEvent) error {
		ev.Target = bucket + "/" + key
		recs, err := tx.RecordVersions(ctx, ns, bucket, key, before, limit+1)
		if err != nil {
			return err
		}
		if len(recs) == 0 && before == 0 {
			return tessera.NotFound("record", bucket+"/"+key)
		}
		recs, more := cutPage(recs, limit)
		if more {
			page.NextCursor = encodeCursor(strconv.FormatInt(recs[len(recs)-1].Version, 10))
		}
		page.Versions = append(page.Versions, recs...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return page, nil
}

// ListRecords lists the heads of a bucket whose keys start with prefix,
// ordered by key. A bucket never written lists empty.
func (s *Service) ListRecords(ctx context.Context, a *auth.Actor, ns, bucket, prefix, cursor string, limit int) (*RecordPage, error) {
	after, limit, err := pageParams(cursor, limit)
	if err != nil {
		return nil, err
	}
	if a, err = s.authorize(ctx, a, ns, ActRecordList); err != nil {
		return nil, err
	}
	page := &RecordPage{Records: []tessera.Record{}}
	err = s.auditedRead(ctx, a, ns, ActRecordList, func(tx store.Tx, ev *tessera.AuditEvent) error {
		ev.Target = bucket + "/"
		recs, err := tx.RecordHeads(ctx, ns, bucket, prefix, after, limit+1)
		if err != nil {
			return err
		}
		recs, more := cutPage(recs, limit)
		if more {
			page.NextCursor = encodeCursor(recs[len(recs)-1].Key)
		}
		page.Records = append(page.Records, recs...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return page, nil
}

// BucketParams is the body of PUT /v1/buckets/{bucket}: the bucket's
// settings, all of them (a PUT replaces).
type BucketParams struct {
	// Public buckets' heads appear on the board.
	Public bool `json:"public"`
}

// PutBucket creates a bucket or replaces its settings.
func (s *Service) PutBucket(ctx context.Context, a *auth.Actor, ns, name string, p BucketParams) (*tessera.Bucket, error) {
	a, err := s.authorize(ctx, a, ns, ActBucketPut)
	if err != nil {
		return nil, err
	}
	now := s.clock.Now()
	b := &tessera.Bucket{Namespace: ns, Name: name, Public: p.Public, CreatedAt: now, UpdatedAt: now}
	err = s.auditedCreate(ctx, a, ns, ActBucketPut, func(tx store.Tx, ev *tessera.AuditEvent) error {
		ev.Target = name
		return tx.BucketPut(ctx, b)
	})
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", name, err)
	}
	return b, nil
}

// ListBuckets lists a namespace's buckets by name.
func (s *Service) ListBuckets(ctx context.Context, a *auth.Actor, ns, cursor string, limit int) (*BucketPage, error) {
	after, limit, err := pageParams(cursor, limit)
	if err != nil {
		return nil, err
	}
	if a, err = s.authorize(ctx, a, ns, ActBucketList); err != nil {
		return nil, err
	}
	page := &BucketPage{Buckets: []tessera.Bucket{}}
	err = s.auditedRead(ctx, a, ns, ActBucketList, func(tx store.Tx, ev *tessera.AuditEvent) error {
		ev.Target = "buckets"
		bs, err := tx.BucketList(ctx, ns, after, limit+1)
		if len(bs) > limit {
			bs = bs[:limit]
			page.NextCursor = encodeCursor(bs[limit-1].Name)
		}
		page.Buckets = append(page.Buckets, bs...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return page, nil
}
