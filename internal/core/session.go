package core

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/ids"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// Anonymous demo sessions (SPEC §12): one call mints an anonymous
// principal with a key for its own demo namespace, bounded per address,
// by a global allowance shared by every node, and by a request quota. The
// namespace and its practice tasks are made by the session's first call,
// so a session never used costs its mint and nothing more.

const (
	// SessionLifetime is how long a session lives before it is purged.
	SessionLifetime = 24 * time.Hour
	// AnonymousBodyBytes bounds every request of a session key (SPEC §5),
	// blob bytes included.
	AnonymousBodyBytes = 64 << 10
	// sessionWindow is the per-address limit's window.
	sessionWindow = time.Hour
	// PracticeQueue is the demo namespace's queue of practice tasks.
	PracticeQueue = "practice"
)

// SessionConfig bounds anonymous sessions.
type SessionConfig struct {
	// PerAddress sessions an hour per grouped address.
	PerAddress int
	// PerHour is the global allowance, accruing evenly: a tenth is there
	// at once (the bucket's capacity), the rest at PerHour an hour.
	PerHour int
	// Requests is each session's request quota.
	Requests int
}

// DefaultSessionConfig returns the defaults of SPEC §12.
func DefaultSessionConfig() SessionConfig {
	return SessionConfig{PerAddress: 10, PerHour: 1000, Requests: 2000}
}

// SessionCapacity is the global bucket's capacity: a tenth of the hour's
// allowance, at least one.
func (c SessionConfig) SessionCapacity() int { return max(c.PerHour/10, 1) }

// Session is a minted session: its key (shown once), namespace and limits,
// and the calls that start its practice.
type Session struct {
	Key       string        `json:"key"`
	KeyID     string        `json:"key_id"`
	Principal string        `json:"principal_id"`
	Namespace string        `json:"namespace"`
	ExpiresAt time.Time     `json:"expires_at"`
	Limits    SessionLimits `json:"limits"`
	NextSteps []NextStep    `json:"next_steps"`
}

// SessionLimits are a session's bounds.
type SessionLimits struct {
	RequestsLeft int `json:"requests_left"`
	ByteLimit    int `json:"byte_limit"`
}

// NextStep is a ready-to-run way to take the session's first practice
// task: a curl command line, or an MCP tool call.
type NextStep struct {
	Title string `json:"title"`
	Curl  string `json:"curl,omitempty"`
	// MCP is a tools/call's params: the tool and its arguments.
	MCP *MCPCall `json:"mcp,omitempty"`
}

// MCPCall is an MCP tools/call: what an agent sends to take a step.
type MCPCall struct {
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments"`
}

// SessionNamespace is the demo namespace of the session whose principal
// is id.
func SessionNamespace(principalID string) string { return "demo-" + strings.ToLower(principalID) }

// StartSession mints an anonymous session for the caller's address (from
// the context, WithClient): the principal, its key, its quota and the
// audit event, and nothing else. Over the per-address limit or the global
// allowance it is rate_limited, with when the next session is possible.
func (s *Service) StartSession(ctx context.Context) (*Session, error) {
	addr, _ := ctx.Value(clientKey{}).(netip.Addr)
	cfg := s.cfg.Sessions
	var out *Session
	var salt *daySalt
	err := s.store.Update(ctx, func(tx store.Tx) error {
		now := s.clock.Now()
		salt = nil
		hashes, fresh, err := s.sessionAddrs(ctx, tx, addr, now)
		if err != nil {
			return err
		}
		salt = fresh
		n, oldest, err := tx.SessionMints(ctx, hashes, now.Add(-sessionWindow))
		if err != nil {
			return err
		}
		if n >= cfg.PerAddress {
			return &tessera.Error{Code: tessera.CodeRateLimited, RetryAfter: oldest.Add(sessionWindow).Sub(now),
				Message: fmt.Sprintf("this address started %d sessions in the last hour; the next is possible when the oldest is an hour old", n)}
		}
		ok, wait, err := tx.SessionTake(ctx, now, float64(cfg.SessionCapacity()), float64(cfg.PerHour))
		if err != nil {
			return err
		}
		if !ok {
			return &tessera.Error{Code: tessera.CodeRateLimited, RetryAfter: wait,
				Message: "the hour's demo sessions are all taken; the next one is available after Retry-After"}
		}
		purgeAt := now.Add(SessionLifetime)
		p := &tessera.Principal{ID: ids.New(now), Kind: tessera.KindAnonymous, DisplayName: "demo session",
			CreatedAt: now, PurgeAt: &purgeAt}
		ns := SessionNamespace(p.ID)
		if err := tx.PrincipalCreate(ctx, p); err != nil {
			return err
		}
		key, err := createKey(ctx, tx, p.ID, []string{"namespace:" + ns, "read", "enqueue", "claim", "write"}, &purgeAt, now)
		if err != nil {
			return err
		}
		if err := tx.SessionCreate(ctx, p.ID, cfg.Requests); err != nil {
			return err
		}
		if err := tx.SessionMintAdd(ctx, hashes[0], p.ID, now); err != nil {
			return err
		}
		ev := &tessera.AuditEvent{ID: ids.New(now), Time: now, Namespace: ns, PrincipalID: p.ID, KeyID: key.ID,
			Action: ActSessionStart, Target: ns, Status: 201, IPHash: hashes[0]}
		if err := tx.AuditInsert(ctx, ev); err != nil {
			return err
		}
		out = &Session{Key: key.Secret, KeyID: key.ID, Principal: p.ID, Namespace: ns, ExpiresAt: purgeAt,
			Limits:    SessionLimits{RequestsLeft: cfg.Requests, ByteLimit: AnonymousBodyBytes},
			NextSteps: s.nextSteps(ns, key.Secret)}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.rememberSalt(salt)
	return out, nil
}

// sessionAddrs returns the hashes the caller's address group is known by
// in the session window: today's salt's, and yesterday's too in the first
// hour of a UTC day, so the limit holds across midnight. The first is
// today's, under which a new mint is recorded.
func (s *Service) sessionAddrs(ctx context.Context, tx store.Tx, addr netip.Addr, now time.Time) ([]string, *daySalt, error) {
	today, fresh, err := s.daySaltFor(ctx, tx, now)
	if err != nil {
		return nil, nil, err
	}
	group := GroupAddr(addr).AsSlice()
	hashes := []string{addrHash(today, group)}
	if now.Sub(now.UTC().Truncate(24*time.Hour)) < sessionWindow {
		yesterday, err := tx.SaltGet(ctx, now.Add(-24*time.Hour).UTC().Format(time.DateOnly))
		switch {
		case err == nil:
			hashes = append(hashes, addrHash(yesterday, group))
		case !errors.Is(err, store.ErrNotFound):
			return nil, nil, err
		}
	}
	return hashes, fresh, nil
}

func addrHash(salt, group []byte) string {
	m := hmac.New(sha256.New, salt)
	m.Write(group)
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// nextSteps are the calls that take the session's first practice task.
func (s *Service) nextSteps(ns, key string) []NextStep {
	base := strings.TrimRight(s.cfg.PublicURL, "/")
	return []NextStep{
		{Title: "Claim your first practice task with curl; its brief says what to do next",
			Curl: fmt.Sprintf(`curl -s -H "Authorization: Bearer %s" %s/ns/%s/v1/claims -d '{"queue":"%s","lease_seconds":300}'`, key, base, ns, PracticeQueue)},
		{Title: "Or, as an MCP client with this key as its bearer token, call claim_task",
			MCP: &MCPCall{Name: "claim_task", Arguments: map[string]any{"namespace": ns, "queue": PracticeQueue, "lease_seconds": 300}}},
	}
}

// BodyLimit is the byte limit of a request of actor a whose route allows
// limit: a session key's requests are held to AnonymousBodyBytes.
func BodyLimit(a *auth.Actor, limit int64) int64 {
	if a != nil && a.Principal.Kind == tessera.KindAnonymous {
		return min(limit, AnonymousBodyBytes)
	}
	return limit
}

// SessionRequest is what every request of a session key passes before it
// is handled, through HTTP and MCP alike: it counts the request against
// the session's quota (429 once spent) and, on the session's first call,
// makes its demo namespace and practice tasks. Other keys pass untouched.
func (s *Service) SessionRequest(ctx context.Context, a *auth.Actor) error {
	if a == nil || a.Principal.Kind != tessera.KindAnonymous {
		return nil
	}
	ns := SessionNamespace(a.Principal.ID)
	seeded := false
	err := s.store.Update(ctx, func(tx store.Tx) error {
		seeded = false
		u, err := tx.SessionUse(ctx, a.Principal.ID)
		if errors.Is(err, store.ErrNotFound) {
			return tessera.ErrUnauthorized // purged, or never a session
		}
		if err != nil {
			return err
		}
		if !u.Counted {
			retry := time.Hour
			if p := a.Principal.PurgeAt; p != nil {
				retry = max(p.Sub(s.clock.Now()), time.Second)
			}
			return &tessera.Error{Code: tessera.CodeRateLimited, RetryAfter: retry,
				Message: fmt.Sprintf("this session's %d requests are spent; start a new session once this one ends", u.Quota)}
		}
		if u.Seeded {
			return nil
		}
		seeded = true
		return s.seedPractice(ctx, tx, a, ns)
	})
	if err == nil && seeded {
		s.markKnown(ns)
	}
	return err
}

// practice is the demo namespace's walk-through: one task per step, each
// brief saying exactly what to do and what comes next. Higher priority
// first, so claims take them in order.
var practice = []struct{ title, brief string }{
	{"1/3 Claim, heartbeat and submit", `You hold this task's lease: the claim answered {lease, task}, and lease.token is your lease token.
1. Keep the lease alive: POST /ns/{ns}/v1/claims/{task}/heartbeat with {"lease_token": "<lease.token>", "progress": {"step": 1}}.
   (MCP: heartbeat with namespace, task_id and lease_token.)
2. Finish: POST /ns/{ns}/v1/claims/{task}/submit with {"lease_token": "<lease.token>", "outcome": "succeeded", "result": {"hello": "world"}}.
   (MCP: submit_task.)
Next: claim again from queue "practice" to get task 2/3.`},
	{"2/3 Leave a record under your lease", `Records are versioned JSON documents; written with a lease token, a version names the run that wrote it.
1. PUT /ns/{ns}/v1/records/practice/notes with {"value": {"learned": "records"}, "lease_token": "<lease.token>"}.
   (MCP: write_record with bucket "practice", key "notes", value and lease_token.)
2. Read it back: GET /ns/{ns}/v1/records/practice/notes — it names your run_id. (MCP: read_record.)
3. Submit this task as succeeded, as in task 1/3.
Next: claim again to get task 3/3.`},
	{"3/3 Upload a blob under your lease", `Blobs are bytes addressed by their SHA-256, uploaded in three calls (at most 64 KiB per request in a demo session).
1. Declare: POST /ns/{ns}/v1/blobs with {"sha256": "<hex of your bytes>", "size": <n>, "content_type": "text/plain", "lease_token": "<lease.token>"}.
2. Send the bytes: PUT /ns/{ns}/v1/blobs/uploads/<upload_id> with the raw bytes as the body.
3. Commit: POST /ns/{ns}/v1/blobs/uploads/<upload_id>/commit — it answers the ref, sha256:<hex>.
   (MCP: upload_blob does all three with base64 content.)
4. Submit this task with {"outcome": "succeeded", "result": {"ref": "<the ref>"}}.
That is the whole worker loop. See your trail: GET /v1/me/audit (MCP: my_audit); your board: GET /ns/{ns}/board.`},
}

// seedPractice makes the session's demo namespace and its practice tasks
// inside tx.
func (s *Service) seedPractice(ctx context.Context, tx store.Tx, a *auth.Actor, ns string) error {
	now := s.clock.Now()
	if err := s.ensureNamespace(ctx, tx, ns, now); err != nil {
		return err
	}
	for i, p := range practice {
		brief := strings.ReplaceAll(p.brief, "{ns}", ns)
		params := EnqueueParams{Queue: PracticeQueue, Title: p.title, Brief: brief, Priority: len(practice) - i, Public: true}
		task := newTask(&params, a, ns, now)
		// The brief names the task; its id is known only now.
		task.Brief = strings.ReplaceAll(task.Brief, "{task}", task.ID)
		if err := s.insertTask(ctx, tx, task, &params, nil, now); err != nil {
			return err
		}
	}
	return tx.SessionSeeded(ctx, a.Principal.ID)
}

// purgeSessions removes sessions whose time is up: each demo namespace's
// data and bytes, then the principals with their keys, quotas and
// namespace pairs. It reports how many sessions it removed.
func (s *Service) purgeSessions(ctx context.Context, now time.Time) (int, error) {
	var ids []string
	if err := s.store.View(ctx, func(tx store.Tx) (err error) {
		ids, err = tx.SessionsExpired(ctx, now, retentionBatch)
		return err
	}); err != nil || len(ids) == 0 {
		return 0, err
	}
	for _, id := range ids {
		if _, err := s.purgeNamespace(ctx, SessionNamespace(id)); err != nil {
			return 0, err
		}
	}
	var n int
	err := s.store.Update(ctx, func(tx store.Tx) (err error) {
		n, err = tx.PrincipalsPurge(ctx, now, len(ids))
		return err
	})
	return n, err
}
