package core

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/ids"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// Audit bounds (SPEC §8, §9).
const (
	// AuditWindow is how far back audit reads reach and how long rows live.
	AuditWindow = 24 * time.Hour
	// observeInterval is how stale last_used_at may get before it is
	// written again.
	observeInterval = 60 * time.Second
	// identityInterval is how stale an unchanged identity snapshot may get;
	// a change of account, kind or name is written at once.
	identityInterval = time.Hour
	// maxPendingCounters forces a flush of the counter buffer.
	maxPendingCounters = 1024
	retentionEvery     = 5 * time.Minute
	retentionBatch     = 500
	maxAuditCounters   = 500
)

// Counter outcomes for things that are not failures.
const (
	OutcomeEmpty    = "empty"
	OutcomeTimeout  = "timeout"
	OutcomeReplayed = "replayed"
)

type clientKey struct{}

// WithClient returns a context carrying the client's address, from which
// the audit trail keeps only a salted hash of its group.
func WithClient(ctx context.Context, addr netip.Addr) context.Context {
	return context.WithValue(ctx, clientKey{}, addr)
}

// GroupAddr is the address an ip_hash is computed over: IPv4 as is, IPv6
// by its /64, an IPv4-mapped IPv6 address by its IPv4.
func GroupAddr(a netip.Addr) netip.Addr {
	a = a.Unmap()
	if a.Is6() {
		p, err := a.Prefix(64)
		if err == nil {
			return p.Addr()
		}
	}
	return a
}

// auditor holds the in-memory parts of the audit trail: today's salt and
// the counter buffer.
type auditor struct {
	mu      sync.Mutex
	saltDay string
	salt    []byte
	// hashes are the address hashes made with salt, by address group: an
	// HMAC per request was a fiftieth of the server's CPU, and a worker
	// comes from one address all day.
	hashes  map[netip.Addr]string
	pending map[counterKey]int64

	retentionMu  sync.Mutex
	retentionRan time.Time
	// flushing keeps one forced flush in flight at most, so a full buffer
	// that cannot be written (storage refusing) does not spawn a storm.
	flushing atomic.Bool
}

type counterKey struct {
	minute                       int64
	namespace, principal, action string
	outcome                      string
}

func newAuditor() *auditor {
	return &auditor{pending: map[counterKey]int64{}, hashes: map[netip.Addr]string{}}
}

// ipHash returns the salted hash of the request's address group, creating
// the day's salt inside tx when this is the day's first event. A salt it
// had to read or create comes back as fresh, for the caller to remember
// once tx has committed: a salt from a rolled-back transaction was never
// stored.
func (s *Service) ipHash(ctx context.Context, tx store.Tx, now time.Time) (hash string, fresh *daySalt, err error) {
	addr, ok := ctx.Value(clientKey{}).(netip.Addr)
	if !ok || !addr.IsValid() {
		return "", nil, nil
	}
	group := GroupAddr(addr)
	salt, fresh, err := s.daySaltFor(ctx, tx, now)
	if err != nil {
		return "", nil, err
	}
	if fresh != nil {
		// A salt read or made inside tx is not remembered yet.
		return addrHash(salt, group.AsSlice()), fresh, nil
	}
	s.audit.mu.Lock()
	defer s.audit.mu.Unlock()
	if h, ok := s.audit.hashes[group]; ok && bytes.Equal(salt, s.audit.salt) {
		return h, nil, nil
	}
	h := addrHash(salt, group.AsSlice())
	if bytes.Equal(salt, s.audit.salt) {
		if len(s.audit.hashes) >= maxRemembered {
			clear(s.audit.hashes)
		}
		s.audit.hashes[group] = h
	}
	return h, nil, nil
}

// daySaltFor returns the address salt of now's UTC day: the one remembered,
// or the store's, made inside tx if the day has none yet (then it comes
// back as fresh too, see ipHash).
func (s *Service) daySaltFor(ctx context.Context, tx store.Tx, now time.Time) ([]byte, *daySalt, error) {
	day := now.UTC().Format(time.DateOnly)
	s.audit.mu.Lock()
	salt := s.audit.salt
	if s.audit.saltDay != day {
		salt = nil
	}
	s.audit.mu.Unlock()
	if salt != nil {
		return salt, nil, nil
	}
	salt, err := tx.SaltGet(ctx, day)
	if errors.Is(err, store.ErrNotFound) {
		random := make([]byte, 32)
		_, _ = rand.Read(random)
		salt, err = tx.SaltPut(ctx, day, random)
	}
	if err != nil {
		return nil, nil, err
	}
	return salt, &daySalt{day: day, salt: salt}, nil
}

// rememberSalt keeps a salt a committed transaction read or made.
func (s *Service) rememberSalt(salt *daySalt) {
	if salt == nil {
		return
	}
	s.audit.mu.Lock()
	if !bytes.Equal(s.audit.salt, salt.salt) {
		clear(s.audit.hashes)
	}
	s.audit.saltDay, s.audit.salt = salt.day, salt.salt
	s.audit.mu.Unlock()
}

type daySalt struct {
	day  string
	salt []byte
}

// audited runs one action: fn inside a write transaction that also writes
// the action's audit event, so the event exists exactly when the action
// happened. fn fills the event's target, run, status and public flag; it
// may clear ev.Action when the action turned out to be a no-op (an empty
// claim), which is then counted instead of evented.
func (s *Service) audited(ctx context.Context, a *auth.Actor, ns, action string, fn func(tx store.Tx, ev *tessera.AuditEvent) error) error {
	return s.act(ctx, a, ns, action, false, fn)
}

// auditedCreate is audited for actions that may create the namespace's
// first rows: it records the namespace in the same transaction.
func (s *Service) auditedCreate(ctx context.Context, a *auth.Actor, ns, action string, fn func(tx store.Tx, ev *tessera.AuditEvent) error) error {
	return s.act(ctx, a, ns, action, true, fn)
}

// auditedRead is audited for reads: fn runs in a read transaction on the
// reader pool, never holding the writer, and its event is written after
// it, in the next write batch (store group commit) — still one event per
// successful read, still refused (503) while storage refuses writes. With
// --audit-reads=counted the read is counted instead: keyed reads then work
// while storage refuses writes, at the price of no per-read event.
func (s *Service) auditedRead(ctx context.Context, a *auth.Actor, ns, action string, fn func(tx store.Tx, ev *tessera.AuditEvent) error) error {
	var read tessera.AuditEvent
	if err := s.store.View(ctx, func(tx store.Tx) error {
		read = tessera.AuditEvent{Status: 200}
		return fn(tx, &read)
	}); err != nil {
		return err
	}
	if s.cfg.CountReads {
		s.Count(a.Principal.ID, ns, action, "ok")
		s.observe(ctx, a, ns, s.clock.Now(), read.Public)
		return nil
	}
	return s.act(ctx, a, ns, action, false, func(_ store.Tx, ev *tessera.AuditEvent) error {
		ev.Target, ev.RunID, ev.Public, ev.Status = read.Target, read.RunID, read.Public, read.Status
		return nil
	})
}

func (s *Service) act(ctx context.Context, a *auth.Actor, ns, action string, creates bool, fn func(tx store.Tx, ev *tessera.AuditEvent) error) error {
	var (
		ev        *tessera.AuditEvent
		salt      *daySalt
		pairAdded bool
	)
	// The function may run again after a lost race (store.ErrRetry), so
	// the event, its id and the one now of the transaction are made inside.
	err := s.store.Update(ctx, func(tx store.Tx) (err error) {
		now := s.clock.Now()
		ev = &tessera.AuditEvent{ID: ids.New(now), Time: now, Namespace: ns, PrincipalID: a.Principal.ID,
			KeyID: a.Key.ID, Action: action, Status: 200}
		salt, pairAdded = nil, false
		if creates {
			if err := s.ensureNamespace(ctx, tx, ns, now); err != nil {
				return err
			}
		}
		if err := fn(tx, ev); err != nil || ev.Action == "" {
			return err
		}
		if ev.IPHash, salt, err = s.ipHash(ctx, tx, now); err != nil {
			return err
		}
		if pairAdded, err = s.notePair(ctx, tx, a.Principal.ID, ns); err != nil {
			return err
		}
		// The id is drawn again, last: events the action wrote along the
		// way (a lapse its claim noticed) come before its own in the
		// stream, as they happened.
		ev.ID = ids.New(ev.Time)
		return tx.AuditInsert(ctx, ev)
	})
	if err != nil {
		return err
	}
	s.rememberSalt(salt)
	if creates {
		s.markKnown(ns)
	}
	if pairAdded {
		s.markPair(a.Principal.ID, ns)
	}
	// Observations follow audited actions; a no-op (an empty claim) is
	// counted, and an idle worker polling all day costs no profile writes.
	if ev.Action != "" {
		s.observe(ctx, a, ns, ev.Time, ev.Public)
	}
	return nil
}

// Count adds one to a counter of something that is not an audited action:
// a denial, a failure, a 429, an empty claim, a long-poll timeout.
func (s *Service) Count(principalID, ns, action, outcome string) {
	if principalID == "" {
		principalID = tessera.Anonymous
	}
	k := counterKey{minute: s.clock.Now().Unix() / 60, namespace: ns, principal: principalID, action: action, outcome: outcome}
	s.audit.mu.Lock()
	s.audit.pending[k]++
	full := len(s.audit.pending) >= maxPendingCounters
	s.audit.mu.Unlock()
	if full && s.audit.flushing.CompareAndSwap(false, true) {
		go func() {
			defer s.audit.flushing.Store(false)
			if err := s.FlushCounters(context.Background(), true); err != nil {
				s.cfg.Log.Warn("counter flush failed; the counters stay buffered for the next flush", "err", err)
			}
		}()
	}
}

// FlushCounters writes buffered counters: all of them, or only those whose
// minute has passed. A failed write puts them back for the next flush.
func (s *Service) FlushCounters(ctx context.Context, all bool) error {
	current := s.clock.Now().Unix() / 60
	s.audit.mu.Lock()
	var batch []tessera.AuditCounter
	for k, n := range s.audit.pending {
		if all || k.minute < current {
			batch = append(batch, tessera.AuditCounter{Minute: time.Unix(k.minute*60, 0).UTC(), Namespace: k.namespace,
				PrincipalID: k.principal, Action: k.action, Outcome: k.outcome, Count: n})
			delete(s.audit.pending, k)
		}
	}
	s.audit.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	var added [][2]string
	err := s.store.Update(ctx, func(tx store.Tx) error {
		added = added[:0]
		for _, c := range batch {
			wrote, err := s.notePair(ctx, tx, c.PrincipalID, c.Namespace)
			if err != nil {
				return err
			}
			if wrote {
				added = append(added, [2]string{c.PrincipalID, c.Namespace})
			}
		}
		return tx.AuditCountersAdd(ctx, batch)
	})
	for _, p := range added {
		if err == nil {
			s.markPair(p[0], p[1])
		}
	}
	if err != nil {
		s.audit.mu.Lock()
		for _, c := range batch {
			s.audit.pending[counterKey{c.Minute.Unix() / 60, c.Namespace, c.PrincipalID, c.Action, c.Outcome}] += c.Count
		}
		s.audit.mu.Unlock()
		return fmt.Errorf("counters not written (%d): %w", len(batch), err)
	}
	return nil
}

// observe makes the observational writes of §8: last_used_at when it is
// older than the interval, and, after a public action, the namespace
// identity snapshot when it is due or the principal's account or kind
// changed. The snapshot names who acted in the public activity feed, the
// one place it is read, which shows public events only: a private action
// needs none. They are read first, written rarely, and a refusal never
// fails the request.
func (s *Service) observe(ctx context.Context, a *auth.Actor, ns string, now time.Time, public bool) {
	p := a.Principal
	touch := p.LastUsedAt == nil || now.Sub(*p.LastUsedAt) >= observeInterval
	key := ns + "\x00" + p.ID
	s.nsMu.Lock()
	seen, known := s.identities[key]
	s.nsMu.Unlock()
	changed := known && (seen.Account != p.Account || seen.Kind != p.Kind || seen.DisplayName != p.DisplayName)
	due := public && (!known || changed || now.Sub(seen.SeenAt) >= identityInterval)
	if !touch && !due {
		return
	}
	id := tessera.NamespaceIdentity{Namespace: ns, PrincipalID: p.ID, Account: p.Account, Kind: p.Kind, DisplayName: p.DisplayName, SeenAt: now}
	wrote := false
	err := s.store.Update(ctx, func(tx store.Tx) error {
		if touch {
			if err := tx.PrincipalTouch(ctx, p.ID, now); err != nil {
				return err
			}
			wrote = true
		}
		if !due {
			return nil
		}
		if !known {
			// After a restart the store may already hold a fresh snapshot.
			stored, err := tx.IdentityGet(ctx, ns, p.ID)
			if err == nil && stored.Account == p.Account && stored.Kind == p.Kind &&
				stored.DisplayName == p.DisplayName && now.Sub(stored.SeenAt) < identityInterval {
				id = *stored
				return nil
			}
		}
		wrote = true
		return tx.IdentityPut(ctx, &id)
	})
	if err != nil {
		return
	}
	if due {
		s.nsMu.Lock()
		if len(s.identities) >= maxRemembered {
			clear(s.identities)
		}
		s.identities[key] = id
		s.nsMu.Unlock()
	}
	if wrote && touch {
		s.auth.Touched(p.ID, now)
	}
}

// AuditPage is an audit read: events newest first with a cursor, and the
// newest counters of the window (first page only).
type AuditPage struct {
	Events     []tessera.AuditEvent   `json:"events"`
	Counters   []tessera.AuditCounter `json:"counters"`
	NextCursor string                 `json:"next_cursor,omitempty"`
}

// AuditQuery filters an audit read.
type AuditQuery struct {
	Namespace string
	Principal string
	Action    string
	Outcome   string
	Since     *time.Time
	Cursor    string
	Limit     int
}

// MyAudit returns the caller's own events and counters of the last 24 h.
func (s *Service) MyAudit(ctx context.Context, a *auth.Actor, q AuditQuery) (*AuditPage, error) {
	a, err := s.auth.Recheck(ctx, a)
	if err != nil {
		return nil, err
	}
	q.Principal = a.Principal.ID
	if a.Principal.Kind == tessera.KindAnonymous {
		// A session acts in its demo namespace alone, and reads it there.
		q.Namespace = SessionNamespace(a.Principal.ID)
	}
	return s.readAudit(ctx, a, ActMyAudit, q)
}

// homeNamespace is where a key's reads of itself are audited: main for
// keys, a session's own demo namespace for session keys (which may not
// write into main).
func homeNamespace(a *auth.Actor) string {
	if a.Principal.Kind == tessera.KindAnonymous {
		return SessionNamespace(a.Principal.ID)
	}
	return tessera.MainNamespace
}

// AdminAudit returns everyone's events and counters of the last 24 h.
func (s *Service) AdminAudit(ctx context.Context, a *auth.Actor, q AuditQuery) (*AuditPage, error) {
	a, err := s.authorize(ctx, a, "", ActAdminAudit)
	if err != nil {
		return nil, err
	}
	return s.readAudit(ctx, a, ActAdminAudit, q)
}

func (s *Service) readAudit(ctx context.Context, a *auth.Actor, action string, q AuditQuery) (*AuditPage, error) {
	now := s.clock.Now()
	f := store.AuditFilter{Namespace: q.Namespace, PrincipalID: q.Principal, Action: q.Action, Outcome: q.Outcome,
		Since: now.Add(-AuditWindow), Limit: q.Limit}
	if q.Since != nil && q.Since.After(f.Since) {
		f.Since = *q.Since
	}
	if f.Limit == 0 {
		f.Limit = DefaultListSize
	}
	if q.Cursor != "" {
		var err error
		if f.Before, err = decodeCursor(q.Cursor); err != nil {
			return nil, tessera.Invalid("cursor", "cursor is not one this server issued")
		}
	}
	// Buffered counters are written first, so the read shows them (§9).
	if err := s.FlushCounters(ctx, true); err != nil {
		return nil, err
	}
	page := &AuditPage{Events: []tessera.AuditEvent{}, Counters: []tessera.AuditCounter{}}
	ns := q.Namespace
	if ns == "" {
		ns = homeNamespace(a)
	}
	err := s.auditedRead(ctx, a, ns, action, func(tx store.Tx, ev *tessera.AuditEvent) error {
		ev.Target = "audit"
		limit := f.Limit
		f.Limit++
		events, err := tx.AuditEvents(ctx, f)
		if err != nil {
			return err
		}
		if len(events) > limit {
			events = events[:limit]
			page.NextCursor = encodeCursor(events[limit-1].ID)
		}
		page.Events = append(page.Events, events...)
		if q.Cursor == "" {
			f.Limit = maxAuditCounters
			counters, err := tx.AuditCounters(ctx, f)
			if err != nil {
				return err
			}
			page.Counters = append(page.Counters, counters...)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return page, nil
}

// RunRetention deletes rows past the audit window, and finished tasks
// older than RetainFinished, in batches of at most 500, at most once every
// 5 minutes per process (SPEC §9). It reports whether it ran.
func (s *Service) RunRetention(ctx context.Context) (bool, error) {
	now := s.clock.Now()
	s.audit.retentionMu.Lock()
	defer s.audit.retentionMu.Unlock()
	if !s.audit.retentionRan.IsZero() && now.Sub(s.audit.retentionRan) < retentionEvery {
		return false, nil
	}
	s.audit.retentionRan = now
	cutoff := now.Add(-AuditWindow)
	purges := []func(store.Tx) (int, error){
		func(tx store.Tx) (int, error) { return tx.AuditEventsPurge(ctx, cutoff, retentionBatch) },
		func(tx store.Tx) (int, error) { return tx.AuditCountersPurge(ctx, cutoff, retentionBatch) },
		func(tx store.Tx) (int, error) { return tx.IdempotencyPurge(ctx, cutoff, retentionBatch) },
		func(tx store.Tx) (int, error) {
			return tx.SaltsPurge(ctx, cutoff.Add(-24*time.Hour).Format(time.DateOnly))
		},
		// Per-address session windows are an hour long.
		func(tx store.Tx) (int, error) {
			return tx.SessionMintsPurge(ctx, now.Add(-sessionWindow), retentionBatch)
		},
	}
	if s.cfg.RetainFinished > 0 {
		finished := now.Add(-s.cfg.RetainFinished)
		purges = append(purges, func(tx store.Tx) (int, error) { return tx.TasksFinishedPurge(ctx, finished, retentionBatch) })
	}
	// Sessions whose time is up go with their demo namespaces; their
	// audit trail stays for its window.
	for {
		n, err := s.purgeSessions(ctx, now)
		if err != nil {
			return true, err
		}
		if n < retentionBatch {
			break
		}
	}
	for _, purge := range purges {
		// Each table is drained batch by batch, a transaction per batch, so
		// no purge holds the writer for long.
		for {
			var n int
			err := s.store.Update(ctx, func(tx store.Tx) (err error) {
				n, err = purge(tx)
				return err
			})
			if err != nil {
				return true, err
			}
			if n < retentionBatch {
				break
			}
		}
	}
	return true, nil
}

// background is the service's housekeeping until it closes: it flushes
// counters whose minute has passed, runs retention, and sweeps uploads not
// committed in time; at the end it flushes every counter.
func (s *Service) background() {
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	var swept time.Time
	log := s.cfg.Log
	deps, gates := make(chan struct{}), make(chan struct{})
	go func() {
		s.depWorker()
		close(deps)
	}()
	go func() {
		s.gateTimer()
		close(gates)
	}()
	for {
		select {
		case <-s.done:
			<-deps
			<-gates
			if err := s.FlushCounters(context.Background(), true); err != nil {
				log.Warn("counters lost: the final flush failed", "err", err)
			}
			close(s.stopped)
			return
		case <-tick.C:
			ctx := context.Background()
			if err := s.FlushCounters(ctx, false); err != nil {
				log.Warn("counter flush failed; the counters stay buffered for the next flush", "err", err)
			}
			if _, err := s.RunRetention(ctx); err != nil {
				log.Warn("retention pass failed; rows past the audit window stay until the next pass", "next_in", retentionEvery, "err", err)
			}
			if now := s.clock.Now(); now.Sub(swept) >= time.Minute {
				swept = now
				if _, err := s.SweepUploads(ctx); err != nil {
					log.Warn("upload sweep failed; expired uploads and their bytes stay until the next sweep", "next_in", time.Minute, "err", err)
				}
			}
		}
	}
}
