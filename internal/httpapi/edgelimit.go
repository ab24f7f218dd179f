package httpapi

import (
	"fmt"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// The per-address limits of the edge (issue 33): a flood of requests that
// carry no key, from a few addresses, must not crowd out the keyed traffic
// the service exists for. They run before any key lookup and touch no
// storage: a map lookup under a mutex per request and per connection.
// Addresses are grouped as the session limit groups them (core.GroupAddr:
// IPv6 by /64, IPv4-mapped as IPv4), since one host holds a whole /64.
const (
	// DefaultConnsPerAddress, DefaultKeylessRate and DefaultKeylessBurst
	// are the flags' defaults: 64 connections is more than a browser (6)
	// or a pool of workers behind one NAT usually opens, and 20 requests
	// a second with a burst of 40 more than the board, discovery and a
	// health checker need, while three flooding addresses get 60 a second
	// between them instead of thousands.
	DefaultConnsPerAddress = 64
	DefaultKeylessRate     = 20
	DefaultKeylessBurst    = 40
	// maxTrackedAddrs bounds the keyless-rate table (about 100 bytes an
	// entry); a full table refuses keyless requests from addresses it does
	// not hold rather than forget the ones it does, which would hand a
	// flood from many addresses a fresh burst each.
	maxTrackedAddrs = 1 << 16
	// sweepEvery is how often the table drops the addresses whose bucket
	// is full again (they are as good as absent); a full table sweeps at
	// most once a second, so new addresses cannot make every request
	// scan it.
	sweepEvery     = time.Minute
	fullSweepEvery = time.Second
	// busyNum/busyDen is how full the global connection cap must be for
	// the busy share to apply: from then on a new connection is taken only
	// from an address holding fewer than its share (the per-address limit
	// / busyShareDiv) of unproven connections, so the last quarter of the
	// cap is left to addresses that hold few.
	busyNum, busyDen = 3, 4
	busyShareDiv     = 8
)

// Why the edge refused, for its counter and its log line.
const (
	refusedConnCap = iota
	refusedConnsPerAddress
	refusedBusyShare
	refusedKeylessRate
	refusedFailedKeys
	nRefusals
)

var refusalNames = [nRefusals]string{"connection_cap", "connections_per_address", "busy_share", "keyless_rate", "failed_keys"}

// edgeCounts counts the edge's refusals, and throttles their log lines:
// a flood refused a request at a time must not become a flood of logs.
type edgeCounts struct {
	refused [nRefusals]atomic.Int64
	lastLog [nRefusals]atomic.Int64 // unix seconds
}

// count records one refusal; it returns the running total, and whether
// to log it (at most every 10 s per reason).
func (e *edgeCounts) count(why int) (int64, bool) {
	n := e.refused[why].Add(1)
	now := time.Now().Unix()
	last := e.lastLog[why].Load()
	return n, last < now-10 && e.lastLog[why].CompareAndSwap(last, now)
}

var descEdgeRefused = prometheus.NewDesc("tessera_edge_refused_total",
	"Connections and requests the edge refused before any key lookup, by reason: connection_cap (503), connections_per_address, busy_share, keyless_rate and failed_keys (429). Refused requests are not in tessera_http_requests_total.",
	[]string{"reason"}, nil)

func (e *edgeCounts) Describe(ch chan<- *prometheus.Desc) { ch <- descEdgeRefused }

func (e *edgeCounts) Collect(ch chan<- prometheus.Metric) {
	for why, name := range refusalNames {
		ch <- prometheus.MustNewConstMetric(descEdgeRefused, prometheus.CounterValue, float64(e.refused[why].Load()), name)
	}
}

// addrBuckets is a token bucket per address group, kept as the time each
// bucket is full again (GCRA): integer time arithmetic, so the allowance
// is exact, and an address whose bucket is full needs no entry. Tokens at
// now are burst − (full − now)/interval. A keyless request needs one token
// and spends it; a request whose key was refused (401) spends one after
// the fact, down to −burst, and while an address is below zero its keyed
// requests wait too: otherwise sending any well-formed key would walk
// around the limit, at a key lookup each.
type addrBuckets struct {
	rate     float64       // tokens a second
	interval time.Duration // one token's worth of time: 1/rate
	burst    int
	max      int

	mu        sync.Mutex
	full      map[netip.Addr]time.Time
	lastSweep time.Time
}

func newAddrBuckets(rate float64, burst int) *addrBuckets {
	// A rate below one a day is one a day: the interval must fit a
	// Duration, and the bucket's arithmetic be exact.
	interval := time.Duration(min(float64(time.Second)/rate, float64(24*time.Hour)))
	return &addrBuckets{rate: rate, interval: interval, burst: burst,
		max: maxTrackedAddrs, full: map[netip.Addr]time.Time{}}
}

// take spends a token of a's for a keyless request at now; when there is
// none it spends nothing and says how long until there is.
func (b *addrBuckets) take(a netip.Addr, now time.Time) (wait time.Duration, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	full, known := b.full[a]
	if !known && !b.room(now) {
		return fullSweepEvery, false
	}
	full = later(full, now)
	if over := full.Sub(now) - time.Duration(b.burst-1)*b.interval; over > 0 {
		return over, false
	}
	b.full[a] = full.Add(b.interval)
	return 0, true
}

// keyed says whether a request carrying a key may go on: not while a's
// bucket is below zero, which only refused keys can bring about.
func (b *addrBuckets) keyed(a netip.Addr, now time.Time) (wait time.Duration, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	full, known := b.full[a]
	if over := full.Sub(now) - time.Duration(b.burst)*b.interval; known && over > 0 {
		return over, false
	}
	return 0, true
}

// charge spends a token of a's for a key that was refused, down to
// −burst: an address sending bad keys faster than the rate is refused
// for at most 2 × burst / rate once it stops.
func (b *addrBuckets) charge(a netip.Addr, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	full, known := b.full[a]
	if !known && !b.room(now) {
		return
	}
	b.full[a] = minTime(later(full, now).Add(b.interval), now.Add(2*time.Duration(b.burst)*b.interval))
}

// room reports whether the table may take another address, sweeping it
// when it is due. b.mu held.
func (b *addrBuckets) room(now time.Time) bool {
	every := sweepEvery
	if len(b.full) >= b.max {
		every = fullSweepEvery
	}
	if now.Sub(b.lastSweep) >= every {
		b.lastSweep = now
		for a, full := range b.full {
			if !full.After(now) {
				delete(b.full, a)
			}
		}
	}
	return len(b.full) < b.max
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// edgeRequest is what the edge made of a request before serving it.
type edgeRequest struct {
	addr netip.Addr // the client's address (clientAddr); invalid if unknown
	// group is addr's group, and keyed whether the request carries a
	// well-formed key; both are set only when the keyless rate applies.
	group netip.Addr
	keyed bool
}

// admitRequest applies the per-address request rate to r: a request
// without a well-formed key spends a token of its address (behind a
// trusted proxy, the forwarded client's), and one with a key goes on
// unless refused keys from its address overdrew the bucket. It never
// waits; a refusal is 429 rate_limited with Retry-After.
func (s *Server) admitRequest(r *http.Request) (edgeRequest, *tessera.Error) {
	var req edgeRequest
	addr, ok := s.clientAddr(r)
	if !ok {
		return req, nil
	}
	req.addr = addr
	if s.keyless == nil {
		return req, nil
	}
	req.group, req.keyed = core.GroupAddr(addr), carriesKey(r)
	now := time.Now()
	if req.keyed {
		if wait, ok := s.keyless.keyed(req.group, now); !ok {
			return req, s.refuseRequest(refusedFailedKeys, &tessera.Error{Code: tessera.CodeRateLimited, RetryAfter: wait,
				Message: "too many requests from this address carried keys that were refused (401); check the key, and retry after Retry-After"})
		}
		return req, nil
	}
	if wait, ok := s.keyless.take(req.group, now); !ok {
		return req, s.refuseRequest(refusedKeylessRate, &tessera.Error{Code: tessera.CodeRateLimited, RetryAfter: wait,
			Message: fmt.Sprintf("requests without a key are limited to %g a second from one address (bursts of %d); retry after Retry-After, or send a key",
				s.keyless.rate, s.keyless.burst)})
	}
	return req, nil
}

// answered charges a refused key (401) to its address: a request that
// sent a well-formed key and was refused counts as a keyless one.
func (s *Server) answered(req edgeRequest, status int) {
	if req.keyed && status == http.StatusUnauthorized {
		s.keyless.charge(req.group, time.Now())
	}
}

func (s *Server) refuseRequest(why int, e *tessera.Error) *tessera.Error {
	if n, log := s.edge.count(why); log {
		s.log.Warn("requests refused at the edge", "reason", refusalNames[why], "refused_total", n)
	}
	return e
}

// carriesKey reports whether r carries what could be a key (the checks
// of auth.Bearer and auth.ParseKey, no lookup): a request with garbage
// in its Authorization header is as keyless as one without.
func carriesKey(r *http.Request) bool {
	bearer, err := auth.Bearer(r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"))
	if err != nil {
		return false
	}
	_, _, err = auth.ParseKey(bearer)
	return err == nil
}
