package tessera

import (
	"encoding/json"
	"time"
)

// Record is one version of a JSON document at bucket/key in a namespace
// (SPEC §1). Every write makes version n+1; the newest is the head. A
// version written under a lease names the run and task that wrote it.
type Record struct {
	Namespace string `json:"-"`
	Bucket    string `json:"bucket"`
	Key       string `json:"key"`
	Version   int64  `json:"version"`
	// Value is omitted where an answer carries only the version's
	// metadata (the answer to a write).
	Value     json.RawMessage `json:"value,omitempty"`
	RunID     string          `json:"run_id,omitempty"`
	TaskID    string          `json:"task_id,omitempty"`
	WrittenBy string          `json:"written_by"`
	CreatedAt time.Time       `json:"created_at"`
}

// Bucket is a named group of records with its settings. Public buckets'
// heads appear on the board.
type Bucket struct {
	Namespace string    `json:"-"`
	Name      string    `json:"name"`
	Public    bool      `json:"public"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Raw-blob policies (SPEC §7): who may read a namespace's blob bytes.
const (
	// RawPrivate lets only the uploading principals and admins read.
	RawPrivate = "private"
	// RawNamespace lets any key with read on the namespace read.
	RawNamespace = "namespace"
)

// ValidRawPolicy reports whether p is a raw-blob policy.
func ValidRawPolicy(p string) bool { return p == RawPrivate || p == RawNamespace }

// NamespaceSettings are a namespace's settings. A namespace without a
// settings row has the defaults (raw policy private).
type NamespaceSettings struct {
	Namespace string    `json:"namespace"`
	RawPolicy string    `json:"raw_policy"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Blob is the metadata of immutable bytes addressed by their SHA-256. The
// bytes themselves live outside the store.
type Blob struct {
	Namespace   string `json:"-"`
	SHA256      string `json:"sha256"`
	Size        int64  `json:"size"`
	ContentType string `json:"content_type"`
	// UploadedBy is the principal whose upload first stored the bytes;
	// later uploaders of the same bytes are recorded as readers.
	UploadedBy string    `json:"uploaded_by"`
	RunID      string    `json:"run_id,omitempty"`
	TaskID     string    `json:"task_id,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
}

// Ref is the blob's reference, "sha256:<hex>".
func (b *Blob) Ref() string { return BlobRef(b.SHA256) }

// BlobRef returns the reference of the blob with hex SHA-256 sum.
func BlobRef(sum string) string { return "sha256:" + sum }

// Upload is a declared blob upload awaiting its bytes and commit. It is
// swept when not committed in time.
type Upload struct {
	Namespace   string
	ID          string
	SHA256      string
	Size        int64
	ContentType string
	PrincipalID string
	RunID       string
	TaskID      string
	CreatedAt   time.Time
}
