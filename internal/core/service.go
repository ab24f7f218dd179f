// Package core is Tessera's domain logic: tasks, claims, leases, admission,
// idle-poll hints, idempotency and administration. It knows no HTTP and no
// SQL: adapters (HTTP, MCP) call its methods with an authenticated actor,
// and it reaches storage only through store.Store.
package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// Config holds the operator-tunable numbers of the core.
type Config struct {
	// ClaimRate and ClaimBurst bound claims per key (token bucket):
	// default 200 a second, burst 400.
	ClaimRate  float64
	ClaimBurst int
	// ClaimConcurrency bounds one key's claims in flight, long-polls
	// included: default 64, so 64 idle workers may share a key.
	ClaimConcurrency int
	// AdmissionWait is how long a claim over the bound waits before 429.
	AdmissionWait time.Duration
	// CountReads counts keyed reads instead of writing an audit event per
	// read (--audit-reads=counted).
	CountReads bool
	// MaxBlobBytes bounds one blob upload (SPEC §5: 32 MiB).
	MaxBlobBytes int64
	// Sessions bounds anonymous demo sessions.
	Sessions SessionConfig
	// PublicURL is the base URL clients reach the server at, for the
	// ready-to-run commands a new session is given.
	PublicURL string
	// RetainFinished is how long succeeded, dead and canceled tasks are
	// kept (with their runs and events) before retention deletes them;
	// 0 keeps them forever.
	RetainFinished time.Duration
	// StreamsPerKey and MaxStreams bound the live event streams open per
	// key (per client address without one) and on the node; StreamKeepAlive
	// is how often an idle stream sends a comment. Zero takes the default.
	StreamsPerKey   int
	MaxStreams      int
	StreamKeepAlive time.Duration
	// Log hears of background failures (counter flushes, retention,
	// upload sweeps) and what they lost or will retry; nil discards.
	Log *slog.Logger
}

// DefaultRetainFinished is how long finished tasks are kept by default.
const DefaultRetainFinished = 7 * 24 * time.Hour

// DefaultConfig returns the default configuration. Claim admission is
// SPEC §6's with other numbers (the spec makes every number a default):
// 200 claims a second per key, burst 400, 64 in flight, so one key can
// drive a worker pool — SPEC's 20/40/8 held a 4-goroutine worker at 20
// tasks a second, and 8 in flight let only 8 workers of a key long-poll.
// docs/operations.md says why these.
func DefaultConfig() Config {
	return Config{ClaimRate: 200, ClaimBurst: 400, ClaimConcurrency: 64, AdmissionWait: time.Second, MaxBlobBytes: DefaultMaxBlobBytes,
		RetainFinished: DefaultRetainFinished, Sessions: DefaultSessionConfig(),
		StreamsPerKey: DefaultStreamsPerKey, MaxStreams: DefaultMaxStreams, StreamKeepAlive: DefaultKeepAlive}
}

// Service is the coordinator of §2: one per process, holding only state
// that may be lost on restart (hints, wakeups, admission, known namespaces).
type Service struct {
	store store.Store
	auth  *auth.Authenticator
	meter *meter.Meter
	clock tessera.Clock
	cfg   Config

	signals   *signals
	admission *admission
	hints     *hints
	queues    *queueMemory
	blob      blobState  // blob.go: the byte store and its locks
	snaps     snapshots  // snapshot.go: public health, board and activity
	depths    depthCache // metrics.go: queue depths for GET /metrics
	runs      runCounter // metrics.go: committed run ends

	audit *auditor

	streams     streamSlots  // stream.go: the live event streams open
	streamReads atomic.Int64 // stream.go: their reads of the audit trail
	public      publicFeed   // publicfeed.go: the keyless streams' reader
	pauses      queueSets    // queuectl.go: the paused queues, remembered
	fleet       queueSets    // fleet.go: the queues whose claims take the fleet path

	claimantsMu sync.Mutex
	claimants   map[string]time.Time // fleet.go: capability sets last recorded, by queue

	nsMu  sync.Mutex
	known map[string]bool // namespaces known to exist in the store
	// pairs are the principal + namespace pairs known to be recorded for
	// audit reads by principal (store.AuditTx.PrincipalNamespaceAdd).
	pairs map[string]bool
	// identities is the namespace identity snapshot as last written.
	identities map[string]tessera.NamespaceIdentity

	done      chan struct{}
	stopped   chan struct{}
	closeOnce sync.Once
}

// New returns a Service over s.
func New(s store.Store, a *auth.Authenticator, m *meter.Meter, clock tessera.Clock, cfg Config) *Service {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.StreamsPerKey <= 0 {
		cfg.StreamsPerKey = DefaultStreamsPerKey
	}
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = DefaultMaxStreams
	}
	if cfg.StreamKeepAlive <= 0 {
		cfg.StreamKeepAlive = DefaultKeepAlive
	}
	svc := &Service{
		store:      s,
		auth:       a,
		meter:      m,
		clock:      clock,
		cfg:        cfg,
		signals:    newSignals(),
		admission:  newAdmission(cfg),
		hints:      newHints(),
		queues:     newQueueMemory(),
		claimants:  map[string]time.Time{},
		audit:      newAuditor(),
		known:      map[string]bool{},
		pairs:      map[string]bool{},
		identities: map[string]tessera.NamespaceIdentity{},
		done:       make(chan struct{}),
		stopped:    make(chan struct{}),
	}
	// State changes drop the namespace's public snapshot (statechange.go),
	// on every node: the topics come back through the store's listener.
	svc.store = watchedStore{Store: s, ended: svc.runs.add}
	s.Listen(svc.notified)
	go svc.background()
	return svc
}

// Close ends every long-poll at once (they answer as if their wait ran
// out), so a graceful shutdown does not wait 20 s for idle workers, and
// writes the buffered counters.
func (s *Service) Close() {
	s.closeOnce.Do(func() { close(s.done) })
	<-s.stopped
}

// StoreCommits reports the store's commits and WAL fsyncs when the
// backend counts them (SQLite's group commit does).
func (s *Service) StoreCommits() (store.CommitStats, bool) {
	c, ok := s.store.(watchedStore).Store.(interface{ CommitStats() store.CommitStats })
	if !ok {
		return store.CommitStats{}, false
	}
	return c.CommitStats(), true
}

// StoreListener reports the health of the store's connection for other
// nodes' notifications, when the backend has one (PostgreSQL's LISTEN).
func (s *Service) StoreListener() (store.ListenerStats, bool) {
	l, ok := s.store.(watchedStore).Store.(interface{ ListenerStats() store.ListenerStats })
	if !ok {
		return store.ListenerStats{}, false
	}
	return l.ListenerStats(), true
}

// Config returns the configuration the service runs with.
func (s *Service) Config() Config { return s.cfg }

// Meter returns the storage meter the service reports.
func (s *Service) Meter() *meter.Meter { return s.meter }

// Auth returns the authenticator the service checks keys with.
func (s *Service) Auth() *auth.Authenticator { return s.auth }

// authorize is the coordinator's full check (§4 step 3): the key is resolved
// again, then what operation op needs of it (NeedOf). It returns the fresh
// actor, whose principal is what the operation is attributed to.
func (s *Service) authorize(ctx context.Context, a *auth.Actor, ns, op string) (*auth.Actor, error) {
	fresh, err := s.auth.Recheck(ctx, a)
	if err != nil {
		return nil, err
	}
	if err := NeedOf(op).Check(fresh, ns); err != nil {
		return nil, err
	}
	return fresh, nil
}

// ensureNamespace records ns in the store inside a write transaction the
// first time this process writes to it; afterwards it costs nothing.
func (s *Service) ensureNamespace(ctx context.Context, tx store.Tx, ns string, now time.Time) error {
	s.nsMu.Lock()
	known := s.known[ns]
	s.nsMu.Unlock()
	if known {
		return nil
	}
	if _, err := tx.NamespaceEnsure(ctx, ns, now); err != nil {
		return fmt.Errorf("namespace %s: %w", ns, err)
	}
	return nil
}

// update runs fn in a write transaction with the transaction's one now
// and, once it committed, marks the namespace it ensured as known.
func (s *Service) update(ctx context.Context, ns string, fn func(tx store.Tx, now time.Time) error) error {
	err := s.store.Update(ctx, func(tx store.Tx) error {
		now := s.clock.Now()
		if err := s.ensureNamespace(ctx, tx, ns, now); err != nil {
			return err
		}
		return fn(tx, now)
	})
	if err == nil {
		s.markKnown(ns)
	}
	return err
}

// maxRemembered bounds the namespaces, pairs and identities remembered in
// memory; past it they are forgotten and re-learned from the store.
const maxRemembered = 65536

func (s *Service) markKnown(ns string) {
	s.nsMu.Lock()
	remember(s.known, ns)
	s.nsMu.Unlock()
}

// remember adds k to a bounded set. s.nsMu held.
func remember(set map[string]bool, k string) {
	if len(set) >= maxRemembered {
		clear(set)
	}
	set[k] = true
}

// notePair records, inside tx, that principal acted or was counted in ns,
// unless this process knows the pair is recorded. It reports whether it
// wrote, for the caller to remember the pair once tx has committed.
func (s *Service) notePair(ctx context.Context, tx store.Tx, principal, ns string) (bool, error) {
	// A session's principal acts in its demo namespace only, which its
	// audit reads name directly (auditScopeOf): no pair is needed.
	if principal == "" || principal == tessera.Anonymous || strings.HasPrefix(ns, "demo-") && SessionNamespace(principal) == ns {
		return false, nil
	}
	s.nsMu.Lock()
	known := s.pairs[principal+"\x00"+ns]
	s.nsMu.Unlock()
	if known {
		return false, nil
	}
	return true, tx.PrincipalNamespaceAdd(ctx, principal, ns)
}

func (s *Service) markPair(principal, ns string) {
	s.nsMu.Lock()
	remember(s.pairs, principal+"\x00"+ns)
	s.nsMu.Unlock()
}

// notFound maps a store miss to the API's not_found for kind/id.
func notFound(err error, kind, id string) error {
	if errors.Is(err, store.ErrNotFound) {
		return tessera.NotFound(kind, id)
	}
	return err
}
