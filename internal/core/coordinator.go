package core

import (
	"context"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/tessera-dev/tessera/internal/tessera"
	"golang.org/x/time/rate"
)

// signals wakes long-polls. A waiter subscribes to its topic before it
// looks at the store, so a wakeup that lands between the look and the wait
// is never missed; fire closes the channel, waking every waiter, who then
// race for the work through the store. A topic lives only while someone
// waits on it, so memory follows the number of waiters.
type signals struct {
	mu     sync.Mutex
	topics map[string]*topic
	// capable are the topics of waiting claims that showed capabilities,
	// by their queue's topic, with the capabilities: a lane's topic fires
	// those that cover its requires, and no other (fleet.go).
	capable map[string]map[string][]string
}

type topic struct {
	ch      chan struct{}
	waiters int
}

func newSignals() *signals {
	return &signals{topics: map[string]*topic{}, capable: map[string]map[string][]string{}}
}

// subscribe returns a channel closed at the topic's next fire, and a func
// to call when the caller stops waiting.
func (s *signals) subscribe(name string) (<-chan struct{}, func()) {
	return s.subscribeCapable(name, nil)
}

// subscribeCapable is subscribe for a claim on a queue's topic by a
// claimant with capabilities (sorted): it is woken by new work of the
// queue it can take — plain tasks, and lanes whose requires it covers.
func (s *signals) subscribeCapable(queue string, caps []string) (<-chan struct{}, func()) {
	name := queue
	if len(caps) > 0 {
		name = queue + capSep + strings.Join(caps, " ")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.topics[name]
	if !ok {
		t = &topic{ch: make(chan struct{})}
		s.topics[name] = t
	}
	if t.waiters == 0 && len(caps) > 0 {
		if s.capable[queue] == nil {
			s.capable[queue] = map[string][]string{}
		}
		s.capable[queue][name] = caps
	}
	t.waiters++
	return t.ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		t.waiters--
		if t.waiters == 0 && s.topics[name] == t {
			delete(s.topics, name)
			s.uncapable(queue, name)
		}
	}
}

func (s *signals) uncapable(queue, name string) {
	if c := s.capable[queue]; c != nil {
		delete(c, name)
		if len(c) == 0 {
			delete(s.capable, queue)
		}
	}
}

// fire wakes the topic's waiters. A queue's topic with a lane's requires
// (laneTopic) wakes only the claims whose capabilities cover them; a
// plain one wakes every claim on the queue.
func (s *signals) fire(name string) {
	base, req, laned := strings.Cut(name, laneSep)
	var requires []string
	if laned {
		requires = strings.Split(req, " ")
	}
	s.mu.Lock()
	var fired []*topic
	take := func(n string) {
		if t, ok := s.topics[n]; ok {
			delete(s.topics, n)
			fired = append(fired, t)
		}
	}
	if !laned {
		take(base)
	}
	for n, caps := range s.capable[base] {
		if covers(caps, requires) {
			take(n)
			s.uncapable(base, n)
		}
	}
	s.mu.Unlock()
	for _, t := range fired {
		close(t.ch)
	}
}

// fireAll fires every topic someone waits on: each waiter looks at the
// store again, and finds whether its topic had news.
func (s *signals) fireAll() {
	s.mu.Lock()
	topics := s.topics
	s.topics, s.capable = map[string]*topic{}, map[string]map[string][]string{}
	s.mu.Unlock()
	for _, t := range topics {
		close(t.ch)
	}
}

// hints keeps the Retry-After advice of empty claims (§6): per key and
// queue it doubles 5, 10, 20, 40, 60; a grant to the key or an enqueue to
// the queue starts it over. Queue generations make the enqueue reset O(1).
// Everything idle for hintIdle is swept, so client-chosen key and queue
// names cannot grow the maps without bound.
type hints struct {
	mu     sync.Mutex
	byKey  map[string]map[string]hint // key id → queue topic → hint
	gens   map[string]generation      // queue topic → its last enqueue
	seq    uint64                     // enqueues seen, across queues
	swept  time.Time
	lastOp map[string]time.Time // key id → last empty claim, for eviction
}

type hint struct {
	next int    // seconds to advise on the next empty claim
	gen  uint64 // the queue's generation when the advice started
}

type generation struct {
	seq uint64
	at  time.Time
}

const (
	hintFirst   = 5
	hintCeiling = 60
	// hintIdle is how long a key's hints outlive its last empty claim: past
	// it they would have been reset by most workloads anyway.
	hintIdle = 10 * time.Minute
)

func newHints() *hints {
	return &hints{byKey: map[string]map[string]hint{}, gens: map[string]generation{}, lastOp: map[string]time.Time{}}
}

// empty records an empty claim and returns the advice for it.
func (h *hints) empty(keyID, topic string, now time.Time) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sweep(now)
	m := h.byKey[keyID]
	if m == nil {
		m = map[string]hint{}
		h.byKey[keyID] = m
	}
	h.lastOp[keyID] = now
	cur, ok := m[topic]
	if gen := h.gens[topic].seq; !ok || cur.gen != gen {
		cur = hint{next: hintFirst, gen: gen}
	}
	advice := cur.next
	cur.next = min(cur.next*2, hintCeiling)
	m[topic] = cur
	return advice
}

// granted resets every hint of the key.
func (h *hints) granted(keyID string) {
	h.mu.Lock()
	delete(h.byKey, keyID)
	delete(h.lastOp, keyID)
	h.mu.Unlock()
}

// enqueued resets every key's hint for the queue.
func (h *hints) enqueued(topic string, now time.Time) {
	h.mu.Lock()
	h.seq++
	h.gens[topic] = generation{seq: h.seq, at: now}
	h.mu.Unlock()
}

func (h *hints) sweep(now time.Time) {
	if now.Sub(h.swept) < time.Minute {
		return
	}
	h.swept = now
	for k, at := range h.lastOp {
		if now.Sub(at) > hintIdle {
			delete(h.byKey, k)
			delete(h.lastOp, k)
		}
	}
	// A generation older than hintIdle has been seen by every key still
	// polling (they poll at least every 60 s); a swept one reads as 0,
	// which at worst starts a hint over early.
	for topic, g := range h.gens {
		if now.Sub(g.at) > hintIdle {
			delete(h.gens, topic)
		}
	}
}

// admission bounds each key's claims (§6): a token bucket for the rate,
// golang.org/x/time/rate's Limiter, and beside it what a rate limiter does
// not do — the in-flight bound, with a wakeup when a slot frees; the
// deadline after which a claim gets 429 rather than waiting on; the
// Retry-After estimate (the limiter knows when its next token comes, not
// when a slot will free); and forgetting idle keys so the map stays
// bounded. It runs on the wall clock, since it limits real request rates,
// not domain time.
type admission struct {
	cfg Config

	mu   sync.Mutex
	keys map[string]*keyBudget
}

type keyBudget struct {
	limiter  *rate.Limiter
	inFlight int
	freed    chan struct{} // closed when a slot frees; replaced after
}

func newAdmission(cfg Config) *admission {
	return &admission{cfg: cfg, keys: map[string]*keyBudget{}}
}

// admit waits up to cfg.AdmissionWait for a token and a slot. It returns a
// release func, or a rate_limited error with the advised wait.
func (a *admission) admit(ctx context.Context, keyID string) (func(), error) {
	deadline := time.Now().Add(a.cfg.AdmissionWait)
	for {
		now := time.Now()
		a.mu.Lock()
		b := a.budget(keyID, now)
		var wait time.Duration
		var freed <-chan struct{}
		if b.inFlight >= a.cfg.ClaimConcurrency {
			freed = b.freed
			wait = time.Second // a slot's release time is unknowable
		} else {
			r := b.limiter.ReserveN(now, 1)
			if wait = r.DelayFrom(now); wait == 0 {
				b.inFlight++
				a.mu.Unlock()
				return func() { a.release(keyID) }, nil
			}
			// Not holding the token while waiting: after the wait the
			// slot and the key are checked again.
			r.CancelAt(now)
		}
		a.mu.Unlock()

		if now.Add(wait).After(deadline) && freed == nil || !now.Before(deadline) {
			return nil, &tessera.Error{Code: tessera.CodeRateLimited,
				Message:    "too many claims for this key; retry later",
				RetryAfter: time.Duration(math.Ceil(wait.Seconds())) * time.Second}
		}
		timer := time.NewTimer(min(wait, deadline.Sub(now)))
		select {
		case <-timer.C:
		case <-freed:
			timer.Stop()
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		}
	}
}

// budget returns the key's budget. a.mu held.
func (a *admission) budget(keyID string, now time.Time) *keyBudget {
	b, ok := a.keys[keyID]
	if !ok {
		if len(a.keys) >= maxBudgets {
			a.sweep(now)
		}
		b = &keyBudget{limiter: rate.NewLimiter(rate.Limit(a.cfg.ClaimRate), a.cfg.ClaimBurst), freed: make(chan struct{})}
		a.keys[keyID] = b
	}
	return b
}

// maxBudgets is how many keys' budgets are kept before idle ones are swept.
const maxBudgets = 4096

// idle reports whether b carries no information a fresh budget would not:
// nothing in flight and the bucket full again.
func (a *admission) idle(b *keyBudget, now time.Time) bool {
	return b.inFlight == 0 && b.limiter.TokensAt(now) >= float64(a.cfg.ClaimBurst)
}

// sweep forgets idle budgets. a.mu held.
func (a *admission) sweep(now time.Time) {
	for id, b := range a.keys {
		if a.idle(b, now) {
			delete(a.keys, id)
		}
	}
}

func (a *admission) release(keyID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	b := a.keys[keyID]
	b.inFlight--
	close(b.freed)
	b.freed = make(chan struct{})
	// Forget an idle budget at once when it can be; the others go in the
	// next sweep.
	if a.idle(b, time.Now()) {
		delete(a.keys, keyID)
	}
}
