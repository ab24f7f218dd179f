package core

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"mime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/blobs"
	"github.com/tessera-dev/tessera/internal/ids"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// Blob bounds (SPEC §5, §7).
const (
	DefaultMaxBlobBytes = 32 << 20
	// UploadTTL is how long a declared upload waits for its commit.
	UploadTTL         = time.Hour
	MaxContentTypeLen = 255
	sweepBatch        = 500
)

// blobState is the service's part in blobs: where their bytes live, and
// locks that keep a commit's "bytes in place, then metadata" apart from
// the sweep's "no metadata, so remove the bytes" for the same blob (on
// this node; on several, a sweep removes only bytes of uploads expired an
// hour, which no commit can still be promoting).
type blobState struct {
	bytes blobs.Bytes
	locks [64]sync.Mutex
}

// SetBlobs gives the service the store of its blobs' bytes. Without one,
// blob routes answer unavailable.
func (s *Service) SetBlobs(b blobs.Bytes) { s.blob.bytes = b }

// Blobs returns the store of blob bytes (nil if none).
func (s *Service) Blobs() blobs.Bytes { return s.blob.bytes }

// MaxBlobBytes is the largest blob upload accepted.
func (s *Service) MaxBlobBytes() int64 {
	if s.cfg.MaxBlobBytes > 0 {
		return s.cfg.MaxBlobBytes
	}
	return DefaultMaxBlobBytes
}

func (s *Service) blobLock(ns, sum string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(ns + "\x00" + sum))
	return int(h.Sum32() % uint32(len(s.blob.locks)))
}

// blobWriter is the check every blob write step starts with: the write
// scope on ns, and a byte store to write to.
func (s *Service) blobWriter(ctx context.Context, a *auth.Actor, ns, op string) (*auth.Actor, blobs.Bytes, error) {
	a, err := s.authorize(ctx, a, ns, op)
	if err != nil {
		return nil, nil, err
	}
	fs, err := s.blobStore()
	if err != nil {
		return nil, nil, err
	}
	return a, fs, nil
}

func (s *Service) blobStore() (blobs.Bytes, error) {
	if s.blob.bytes == nil {
		return nil, tessera.Errorf(tessera.CodeUnavailable, "this server has no blob storage configured")
	}
	return s.blob.bytes, nil
}

// ParseSum accepts a SHA-256 as 64 hex digits or as a ref "sha256:<hex>"
// and returns the lowercase hex.
func ParseSum(field, v string) (string, error) {
	sum := strings.TrimPrefix(strings.ToLower(v), "sha256:")
	if !blobs.ValidSum(sum) {
		return "", tessera.Invalid(field, "%s must be 64 hex digits, optionally prefixed sha256:", field)
	}
	return sum, nil
}

// DeclareBlobParams is the body of POST /v1/blobs.
type DeclareBlobParams struct {
	SHA256      string `json:"sha256"`
	Size        *int64 `json:"size"`
	ContentType string `json:"content_type,omitempty"`
	// LeaseToken binds the blob to the run and task of that lease.
	LeaseToken string `json:"lease_token,omitempty"`
	// RawPolicy sets the namespace's raw-blob policy if this is its first
	// upload; afterwards it must match (or be omitted).
	RawPolicy string `json:"raw_policy,omitempty"`
}

// BlobDeclared answers a declaration: an upload to send the bytes to, or
// the reference of bytes the namespace already holds.
type BlobDeclared struct {
	Exists    bool       `json:"exists"`
	Ref       string     `json:"ref,omitempty"`
	UploadID  string     `json:"upload_id,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	MaxBytes  int64      `json:"max_bytes,omitempty"`
}

func (s *Service) checkDeclare(p *DeclareBlobParams) (string, error) {
	sum, err := ParseSum("sha256", p.SHA256)
	if err != nil {
		return "", err
	}
	if p.Size == nil || *p.Size < 0 || *p.Size > s.MaxBlobBytes() {
		return "", tessera.Invalid("size", "size is required, 0–%d bytes", s.MaxBlobBytes())
	}
	if p.ContentType == "" {
		p.ContentType = "application/octet-stream"
	}
	mt, params, err := mime.ParseMediaType(p.ContentType)
	if err != nil || len(p.ContentType) > MaxContentTypeLen {
		return "", tessera.Invalid("content_type", "content_type must be a media type of at most %d bytes", MaxContentTypeLen)
	}
	p.ContentType = mime.FormatMediaType(mt, params)
	if p.ContentType == "" || len(p.ContentType) > MaxContentTypeLen {
		return "", tessera.Invalid("content_type", "content_type must be a media type of at most %d bytes", MaxContentTypeLen)
	}
	return sum, nil
}

// rawPolicy returns the namespace's raw-blob policy and whether it was
// ever set (the default is private).
func rawPolicy(ctx context.Context, tx store.Tx, ns string) (string, bool, error) {
	st, err := tx.NamespaceSettingsGet(ctx, ns)
	if errors.Is(err, store.ErrNotFound) {
		return tessera.RawPrivate, false, nil
	}
	if err != nil {
		return "", false, err
	}
	return st.RawPolicy, true, nil
}

// mayRead is the raw-blob policy (§7): admins, the uploader and recorded
// readers always; anyone with read on the namespace under "namespace".
func mayRead(ctx context.Context, tx store.Tx, a *auth.Actor, b *tessera.Blob, policy string) (bool, error) {
	if a.Scopes().Admin() || b.UploadedBy == a.Principal.ID || policy == tessera.RawNamespace {
		return true, nil
	}
	return tx.BlobReaderCheck(ctx, b.Namespace, b.SHA256, a.Principal.ID)
}

// DeclareBlob is the first of the three upload calls. Bytes the namespace
// already holds answer exists at once, and the caller is recorded as a
// reader, when the caller may read them anyway (its own upload, an admin,
// or the namespace policy). Otherwise the caller gets an upload like any
// other, whether or not the bytes exist: knowing a hash is not holding the
// bytes, so under the private policy another principal must send them
// (proof of possession) and learns nothing of their existence.
func (s *Service) DeclareBlob(ctx context.Context, a *auth.Actor, ns string, p DeclareBlobParams) (*BlobDeclared, error) {
	sum, err := s.checkDeclare(&p)
	if err != nil {
		return nil, err
	}
	if a, _, err = s.blobWriter(ctx, a, ns, ActBlobDeclare); err != nil {
		return nil, err
	}
	// Bytes this caller could never send (a session key's uploads are
	// held to its body cap) are refused now, not after the upload.
	limit := BodyLimit(a, s.MaxBlobBytes())
	if *p.Size > limit {
		return nil, uploadTooLarge(limit)
	}
	var out BlobDeclared
	err = s.update(ctx, ns, func(tx store.Tx, now time.Time) error {
		u := tessera.Upload{Namespace: ns, ID: ids.New(now), SHA256: sum, Size: *p.Size, ContentType: p.ContentType,
			PrincipalID: a.Principal.ID, CreatedAt: now}
		if p.LeaseToken != "" {
			task, err := leaseByToken(ctx, tx, ns, p.LeaseToken, now)
			if err != nil {
				return err
			}
			u.RunID, u.TaskID = task.Lease.RunID, task.ID
		}
		policy, set, err := rawPolicy(ctx, tx, ns)
		if err != nil {
			return err
		}
		switch {
		case !set:
			// The first upload of a namespace sets its policy, once: of
			// concurrent first uploads one stores it, and the others run
			// again and meet it like any later upload.
			if p.RawPolicy != "" {
				policy = p.RawPolicy
			}
			err := tx.NamespaceSettingsCreate(ctx, &tessera.NamespaceSettings{Namespace: ns, RawPolicy: policy, UpdatedAt: now})
			if errors.Is(err, store.ErrConflict) {
				return fmt.Errorf("raw policy of namespace %s set meanwhile: %w", ns, store.ErrRetry)
			}
			if err != nil {
				return err
			}
		case p.RawPolicy != "" && p.RawPolicy != policy:
			return tessera.Errorf(tessera.CodeInvalidState,
				"namespace %s has raw_policy %s; only an admin may change it (PUT /v1/admin/namespaces/%s/settings)", ns, policy, ns)
		}
		blob, err := tx.BlobGet(ctx, ns, sum)
		switch {
		case err == nil:
			readable, err := mayRead(ctx, tx, a, blob, policy)
			if err != nil {
				return err
			}
			if readable {
				if blob.Size != u.Size {
					return tessera.Invalid("size", "the bytes with this sha256 are %d bytes, not %d", blob.Size, u.Size)
				}
				if blob.UploadedBy != a.Principal.ID {
					if err := tx.BlobReaderAdd(ctx, ns, sum, a.Principal.ID, now); err != nil {
						return err
					}
				}
				out = BlobDeclared{Exists: true, Ref: blob.Ref()}
				return nil
			}
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		if err := tx.UploadCreate(ctx, &u); err != nil {
			return err
		}
		expires := now.Add(UploadTTL)
		out = BlobDeclared{UploadID: u.ID, ExpiresAt: &expires, MaxBytes: limit}
		return nil
	})
	if err = s.noticeLapse(ctx, ns, p.LeaseToken, err); err != nil {
		return nil, err
	}
	// Declaring is a pre-check of the commit, which writes the event (§9).
	s.Count(a.Principal.ID, ns, ActBlobDeclare, "ok")
	return &out, nil
}

// liveUpload returns the caller's upload id, if it has not expired. Another
// principal's upload is not found: upload ids are not shared.
func (s *Service) liveUpload(ctx context.Context, a *auth.Actor, ns, id string) (*tessera.Upload, error) {
	var u *tessera.Upload
	err := s.store.View(ctx, func(tx store.Tx) error {
		var err error
		u, err = tx.UploadGet(ctx, ns, id)
		return err
	})
	if errors.Is(err, store.ErrNotFound) || err == nil && (u.PrincipalID != a.Principal.ID || s.expired(u)) {
		return nil, tessera.NotFound("upload", id)
	}
	return u, err
}

func (s *Service) expired(u *tessera.Upload) bool {
	return !s.clock.Now().Before(u.CreatedAt.Add(UploadTTL))
}

// UploadReceived answers the byte upload: what arrived, and whether it is
// what was declared (the commit checks again).
type UploadReceived struct {
	UploadID string `json:"upload_id"`
	Size     int64  `json:"size"`
	SHA256   string `json:"sha256"`
	Matches  bool   `json:"matches"`
}

// UploadBlob is the second call: it streams the bytes of a declared upload
// to the byte store, at most MaxBlobBytes of them, hashing on the way. A
// repeat replaces the bytes sent before. It writes no metadata.
func (s *Service) UploadBlob(ctx context.Context, a *auth.Actor, ns, id string, body io.Reader) (*UploadReceived, error) {
	a, fs, err := s.blobWriter(ctx, a, ns, ActBlobUpload)
	if err != nil {
		return nil, err
	}
	u, err := s.liveUpload(ctx, a, ns, id)
	if err != nil {
		return nil, err
	}
	limit := BodyLimit(a, s.MaxBlobBytes())
	got, err := fs.Receive(ctx, id, body, limit)
	var readErr *blobs.ReadError
	switch {
	case errors.Is(err, blobs.ErrTooLarge):
		return nil, uploadTooLarge(limit)
	case errors.As(err, &readErr):
		return nil, tessera.Errorf(tessera.CodeInvalidRequest, "the upload body could not be read to its end")
	case err != nil:
		return nil, err
	}
	s.Count(a.Principal.ID, ns, ActBlobUpload, "ok") // a pre-check of the commit
	return &UploadReceived{UploadID: id, Size: got.Size, SHA256: got.SHA256, Matches: got.Size == u.Size && got.SHA256 == u.SHA256}, nil
}

// uploadTooLarge refuses blob bytes over limit, the caller's upload cap.
func uploadTooLarge(limit int64) error {
	return tessera.Errorf(tessera.CodePayloadTooLarge, "a blob upload is at most %d bytes here", limit)
}

// BlobInfo is a blob's metadata with its reference.
type BlobInfo struct {
	Ref string `json:"ref"`
	tessera.Blob
}

func blobInfo(b *tessera.Blob) *BlobInfo { return &BlobInfo{Ref: b.Ref(), Blob: *b} }

// CommitBlob is the third call: it verifies the received bytes against the
// declared size and SHA-256 (a mismatch discards them: 400), puts them at
// their content address, then stores the metadata in one transaction. A
// crash between the two leaves bytes nobody can see and the upload still
// declared, so the commit can be retried; the sweep removes such bytes
// once the upload expires.
func (s *Service) CommitBlob(ctx context.Context, a *auth.Actor, ns, id, idemKey string) (*BlobInfo, error) {
	a, fs, err := s.blobWriter(ctx, a, ns, ActBlobCommit)
	if err != nil {
		return nil, err
	}
	var out BlobInfo
	req := struct {
		UploadID string `json:"upload_id"`
	}{id}
	e := store.Idempotency{Namespace: ns, PrincipalID: a.Principal.ID, Route: "blob-commit", Key: idemKey, CreatedAt: s.clock.Now()}
	if idemKey != "" {
		// A repeat is answered before anything else: its upload is gone.
		// The check reuses idempotent() in a read transaction, where act
		// only says "not done yet".
		err := s.store.View(ctx, func(tx store.Tx) error {
			_, err := idempotent(ctx, tx, nil, e, req, &out, func() error { return errFirstTime })
			return err
		})
		if err == nil {
			s.countReplay(true, a, ns, ActBlobCommit)
			return &out, nil
		}
		if !errors.Is(err, errFirstTime) {
			return nil, err
		}
	}
	u, err := s.liveUpload(ctx, a, ns, id)
	if err != nil {
		return nil, err
	}
	mu := &s.blob.locks[s.blobLock(ns, u.SHA256)]
	mu.Lock()
	defer mu.Unlock()
	var mismatch *blobs.MismatchError
	switch err := fs.Promote(ctx, id, ns, u.SHA256, u.Size); {
	case errors.Is(err, blobs.ErrNoUpload):
		if _, err := s.liveUpload(ctx, a, ns, id); err != nil {
			return nil, err // committed meanwhile by a concurrent call
		}
		return nil, tessera.Errorf(tessera.CodeInvalidState, "upload %s has no bytes; send them with PUT first", id)
	case errors.As(err, &mismatch):
		field := "sha256"
		if mismatch.Size != u.Size {
			field = "size"
		}
		return nil, tessera.Invalid(field, "the uploaded bytes (%d bytes, sha256 %s) are not the declared %d bytes with sha256 %s; they were discarded",
			mismatch.Size, mismatch.SHA256, u.Size, u.SHA256)
	case err != nil:
		return nil, err
	}
	replayed := false
	err = s.auditedCreate(ctx, a, ns, ActBlobCommit, func(tx store.Tx, ev *tessera.AuditEvent) (err error) {
		ev.Target, ev.RunID, ev.TaskID = tessera.BlobRef(u.SHA256), u.RunID, u.TaskID
		replayed, err = idempotent(ctx, tx, ev, e, req, &out, func() error {
			if err := tx.UploadDelete(ctx, ns, id); err != nil {
				return notFound(err, "upload", id)
			}
			blob, err := tx.BlobGet(ctx, ns, u.SHA256)
			switch {
			case err == nil:
				// The bytes were there already: this principal has now
				// shown it holds them, and becomes a reader.
				if blob.UploadedBy != a.Principal.ID {
					if err := tx.BlobReaderAdd(ctx, ns, u.SHA256, a.Principal.ID, s.clock.Now()); err != nil {
						return err
					}
				}
			case errors.Is(err, store.ErrNotFound):
				blob = &tessera.Blob{Namespace: ns, SHA256: u.SHA256, Size: u.Size, ContentType: u.ContentType,
					UploadedBy: a.Principal.ID, RunID: u.RunID, TaskID: u.TaskID, CreatedAt: s.clock.Now()}
				if err := tx.BlobPut(ctx, blob); err != nil {
					return err
				}
			default:
				return err
			}
			out = *blobInfo(blob)
			return nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	s.countReplay(replayed, a, ns, ActBlobCommit)
	// The metadata is stored; the upload's own name for the bytes goes.
	// Left behind by a crash, it is swept with the temporary files.
	_ = fs.Discard(ctx, id)
	return &out, nil
}

// errFirstTime is what an idempotency pre-check's act answers: no
// response is remembered for this key yet.
var errFirstTime = errors.New("not done before")

// readableBlob returns a blob's metadata if the caller may read it. A blob
// the policy hides is not found, exactly like a missing one.
func (s *Service) readableBlob(ctx context.Context, a *auth.Actor, ns, sum, action string) (*tessera.Blob, error) {
	a, err := s.authorize(ctx, a, ns, action)
	if err != nil {
		return nil, err
	}
	var blob *tessera.Blob
	err = s.auditedRead(ctx, a, ns, action, func(tx store.Tx, ev *tessera.AuditEvent) error {
		ev.Target = tessera.BlobRef(sum)
		var err error
		if blob, err = tx.BlobGet(ctx, ns, sum); err != nil {
			return err
		}
		ev.RunID = blob.RunID
		policy, _, err := rawPolicy(ctx, tx, ns)
		if err != nil {
			return err
		}
		ok, err := mayRead(ctx, tx, a, blob, policy)
		if err == nil && !ok {
			return store.ErrNotFound
		}
		return err
	})
	if err != nil {
		return nil, notFound(err, "blob", tessera.BlobRef(sum))
	}
	return blob, nil
}

// BlobMeta returns a blob's metadata under the raw-blob policy.
func (s *Service) BlobMeta(ctx context.Context, a *auth.Actor, ns, sum string) (*BlobInfo, error) {
	sum, err := ParseSum("sha256", sum)
	if err != nil {
		return nil, err
	}
	blob, err := s.readableBlob(ctx, a, ns, sum, ActBlobMeta)
	if err != nil {
		return nil, err
	}
	return blobInfo(blob), nil
}

// OpenBlob returns a blob's metadata and its bytes, under the raw-blob
// policy. The caller closes the bytes.
func (s *Service) OpenBlob(ctx context.Context, a *auth.Actor, ns, sum string) (*BlobInfo, io.ReadSeekCloser, error) {
	sum, err := ParseSum("sha256", sum)
	if err != nil {
		return nil, nil, err
	}
	fs, err := s.blobStore()
	if err != nil {
		return nil, nil, err
	}
	blob, err := s.readableBlob(ctx, a, ns, sum, ActBlobRead)
	if err != nil {
		return nil, nil, err
	}
	f, err := fs.Open(ctx, ns, sum)
	if errors.Is(err, blobs.ErrMissing) {
		// Metadata without bytes: bytes stored on one node's disk before
		// the deployment kept them where every node reads them, or a
		// store that lost them. Not the client's fault, nor a bug here.
		return nil, nil, store.Unavailable(fmt.Sprintf("the bytes of blob %s are not in this deployment's blob storage (%s); "+
			"if they were stored on a node's disk, run `tessera admin blobs migrate` there (docs/operations.md)", tessera.BlobRef(sum), fs.Where()),
			time.Minute, err)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("blob %s of namespace %s: %w", sum, ns, err)
	}
	return blobInfo(blob), f, nil
}

// SweepUploads deletes uploads not committed within UploadTTL, with their
// bytes, and removes bytes a crashed commit left without metadata. It also
// clears temporary files of crashed uploads. The server runs it
// periodically; it reports how many uploads it deleted.
func (s *Service) SweepUploads(ctx context.Context) (int, error) {
	fs := s.blob.bytes
	if fs == nil {
		return 0, nil
	}
	var expired []tessera.Upload
	err := s.store.View(ctx, func(tx store.Tx) error {
		var err error
		expired, err = tx.UploadsExpired(ctx, s.clock.Now().Add(-UploadTTL), sweepBatch)
		return err
	})
	if err != nil || len(expired) == 0 {
		if err == nil {
			_, err = fs.Sweep(ctx, UploadTTL)
		}
		return 0, err
	}
	// Hold the locks of every blob concerned, in order, so no commit of the
	// same bytes sits between placing them and storing their metadata.
	var held []int
	for _, u := range expired {
		held = append(held, s.blobLock(u.Namespace, u.SHA256))
	}
	slices.Sort(held)
	held = slices.Compact(held)
	for _, i := range held {
		s.blob.locks[i].Lock()
	}
	defer func() {
		for _, i := range held {
			s.blob.locks[i].Unlock()
		}
	}()
	for _, u := range expired {
		if err := fs.Discard(ctx, u.ID); err != nil {
			return 0, err
		}
	}
	var orphans []tessera.Upload
	err = s.store.Update(ctx, func(tx store.Tx) error {
		orphans = orphans[:0]
		for _, u := range expired {
			if err := tx.UploadDelete(ctx, u.Namespace, u.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
			_, err := tx.BlobGet(ctx, u.Namespace, u.SHA256)
			if errors.Is(err, store.ErrNotFound) {
				orphans = append(orphans, u)
			} else if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	for _, u := range orphans {
		if err := fs.Remove(ctx, u.Namespace, u.SHA256); err != nil {
			return 0, err
		}
	}
	_, err = fs.Sweep(ctx, UploadTTL)
	return len(expired), err
}

// NamespaceSettingsParams is the body of PUT /v1/admin/namespaces/{ns}/settings.
type NamespaceSettingsParams struct {
	RawPolicy string `json:"raw_policy"`
}

// PutNamespaceSettings sets a namespace's settings (admin).
func (s *Service) PutNamespaceSettings(ctx context.Context, a *auth.Actor, ns string, p NamespaceSettingsParams) (*tessera.NamespaceSettings, error) {
	a, err := s.authorize(ctx, a, "", ActNamespaceSet)
	if err != nil {
		return nil, err
	}
	st := &tessera.NamespaceSettings{Namespace: ns, RawPolicy: p.RawPolicy, UpdatedAt: s.clock.Now()}
	err = s.auditedCreate(ctx, a, ns, ActNamespaceSet, func(tx store.Tx, ev *tessera.AuditEvent) error {
		ev.Target = ns
		return tx.NamespaceSettingsPut(ctx, st)
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// GetNamespaceSettings returns a namespace's settings, the defaults if none
// were set (admin).
func (s *Service) GetNamespaceSettings(ctx context.Context, a *auth.Actor, ns string) (*tessera.NamespaceSettings, error) {
	a, err := s.authorize(ctx, a, "", ActNamespaceGet)
	if err != nil {
		return nil, err
	}
	var st *tessera.NamespaceSettings
	err = s.auditedRead(ctx, a, ns, ActNamespaceGet, func(tx store.Tx, ev *tessera.AuditEvent) error {
		ev.Target = ns
		var err error
		st, err = tx.NamespaceSettingsGet(ctx, ns)
		if errors.Is(err, store.ErrNotFound) {
			st, err = &tessera.NamespaceSettings{Namespace: ns, RawPolicy: tessera.RawPrivate}, nil
		}
		return err
	})
	return st, err
}
