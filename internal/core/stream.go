package core

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/ids"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// The live event stream (GET /v1/events): a namespace's events as they
// commit, read from the audit trail (event.go). A stream waits on the
// namespace's state-change topic, which every committed change notifies
// on every node (statechange.go, the store's LISTEN/NOTIFY on PostgreSQL),
// and reads the trail past its cursor when woken: an idle stream reads and
// writes nothing, a busy one reads what it sends. Opening one is audited
// once, like the claim-events long-poll.

// Stream bounds and pace.
const (
	// DefaultStreamsPerKey bounds the streams one key (or, without a key,
	// one client address) holds open.
	DefaultStreamsPerKey = 8
	// DefaultMaxStreams bounds the streams a node holds open.
	DefaultMaxStreams = 4096
	// DefaultKeepAlive is how often an idle stream sends a comment, so
	// proxies and clients see it alive.
	DefaultKeepAlive = 15 * time.Second
	// HeartbeatEvery coalesces heartbeats: a stream sends at most one per
	// task per this long.
	HeartbeatEvery = 10 * time.Second
	// streamPage is how many events one read of the trail takes.
	streamPage = 500
	// maxBeats bounds the tasks whose last heartbeat a stream remembers.
	maxBeats = 4096
	// SessionStreams bounds the streams one anonymous session holds
	// open: fewer than a key's, since anyone may mint sessions.
	SessionStreams = 2
	// expiryCheck is how often an open stream of a key with an expiry
	// looks whether it has passed, idle or not.
	expiryCheck = time.Second
)

// Shares of a node's streams: anonymous sessions together, and streams
// without a key (the board's) together, may hold at most a quarter each,
// so keyed streams always have half of MaxStreams, whatever sessions and
// a crowd of anonymous readers do.
const streamShareDivisor = 4

// StreamParams is what a stream follows: a queue or a task (or all of
// the namespace), after LastEventID (or from now).
type StreamParams struct {
	Queue, TaskID string
	LastEventID   string
}

// EventSink is where a stream writes: the transport's side of it.
type EventSink interface {
	// Open is called once the stream is admitted and audited, before
	// anything else: the transport sends its headers.
	Open() error
	// Event writes an event; Gap says events were missed; KeepAlive
	// writes a comment. Flush sends what was written.
	Event(e *Event) error
	Gap(g *Gap) error
	KeepAlive() error
	Flush() error
}

// Gap tells a stream's reader that events were missed: the cursor it
// resumed from lies outside the retention window. The stream goes on from
// ID (now); what happened before is to be read again (list the tasks).
type Gap struct {
	ID     string `json:"id"`
	After  string `json:"after"`
	Reason string `json:"reason"`
}

// streamTopic wakes the streams of a namespace; streamKeyTopic and
// streamPrincipalTopic those of a key whose key or principal changed, to
// check it again.
func streamTopic(ns string) string          { return "e\x00" + ns }
func streamKeyTopic(id string) string       { return "ek\x00" + id }
func streamPrincipalTopic(id string) string { return "ep\x00" + id }

// streamSlots counts the open streams, per owner, per kind of owner and
// in all.
type streamSlots struct {
	mu     sync.Mutex
	total  int
	by     map[string]int
	byKind map[streamKind]int
}

// streamKind is who holds a stream: a key, an anonymous session's key, or
// a client address without a key.
type streamKind int

const (
	keyedStream streamKind = iota
	sessionStream
	keylessStream
)

// streamOwner is who holds a stream for a's request (nil: no key) from
// the request's address.
func streamOwner(ctx context.Context, a *auth.Actor) (string, streamKind) {
	switch {
	case a == nil:
		return "addr:" + clientGroup(ctx), keylessStream
	case a.Principal.Kind == tessera.KindAnonymous:
		return "key:" + a.Key.ID, sessionStream
	}
	return "key:" + a.Key.ID, keyedStream
}

// takeStream holds a slot for owner, of kind, or says why not.
func (s *Service) takeStream(owner string, kind streamKind) (func(), error) {
	sl := &s.streams
	sl.mu.Lock()
	defer sl.mu.Unlock()
	full := func(msg string, args ...any) error {
		return &tessera.Error{Code: tessera.CodeRateLimited, RetryAfter: 5 * time.Second, Message: fmt.Sprintf(msg, args...)}
	}
	share := max(s.cfg.MaxStreams/streamShareDivisor, 1)
	switch {
	case sl.total >= s.cfg.MaxStreams:
		return nil, full("this server holds %d event streams, its most; retry later", s.cfg.MaxStreams)
	case kind == sessionStream && sl.byKind[kind] >= share:
		return nil, full("anonymous sessions hold %d event streams on this server, their most; retry later, or use a key", share)
	case kind == keylessStream && sl.byKind[kind] >= share:
		return nil, full("streams without a key hold %d event streams on this server, their most; retry later, or use a key", share)
	case kind == sessionStream && sl.by[owner] >= SessionStreams:
		return nil, full("%d event streams are open with this session already, its most; close one (one stream can follow a whole namespace)", SessionStreams)
	case kind == keylessStream && sl.by[owner] >= s.cfg.StreamsPerKey:
		return nil, full("%d event streams are open from this address without a key already, its most; close one", s.cfg.StreamsPerKey)
	case kind == keyedStream && sl.by[owner] >= s.cfg.StreamsPerKey:
		return nil, full("%d event streams are open with this key on this server already, its most; close one (one stream can follow a whole namespace)", s.cfg.StreamsPerKey)
	}
	if sl.by == nil {
		sl.by, sl.byKind = map[string]int{}, map[streamKind]int{}
	}
	sl.total++
	sl.by[owner]++
	sl.byKind[kind]++
	return func() {
		sl.mu.Lock()
		sl.total--
		sl.byKind[kind]--
		if sl.by[owner]--; sl.by[owner] == 0 {
			delete(sl.by, owner)
		}
		sl.mu.Unlock()
	}, nil
}

// StreamReads reports how often live streams have read the audit trail
// on this node since start: once per wake of each keyed stream, once per
// wake of the public feed for every keyless one.
func (s *Service) StreamReads() int64 { return s.streamReads.Load() }

// OpenStreamsByHolder reports the streams open on this node by who holds
// them: "key", "session" or "keyless".
func (s *Service) OpenStreamsByHolder() map[string]int {
	s.streams.mu.Lock()
	defer s.streams.mu.Unlock()
	return map[string]int{"key": s.streams.byKind[keyedStream], "session": s.streams.byKind[sessionStream], "keyless": s.streams.byKind[keylessStream]}
}

// OpenStreams reports the streams open on this node.
func (s *Service) OpenStreams() int {
	s.streams.mu.Lock()
	defer s.streams.mu.Unlock()
	return s.streams.total
}

// Stream follows ns's events into sink until ctx ends, the service
// closes, or the key is no longer good for it (revoked, expired, its
// grant gone: then its error). Without a key (a nil actor) it follows the
// public events of main, as the board shows them.
func (s *Service) Stream(ctx context.Context, a *auth.Actor, ns string, p StreamParams, sink EventSink) error {
	a, err := s.publicCaller(ctx, a, ns, ActEvents)
	if err != nil {
		return err
	}
	now := s.clock.Now()
	st := &streamer{s: s, a: a, ns: ns, sink: sink, lag: s.eventLag(),
		filter: store.StreamFilter{Namespace: ns, Actions: streamActions, Queue: p.Queue, TaskID: p.TaskID, Public: a == nil, Limit: streamPage}}
	var gap *Gap
	if p.LastEventID != "" {
		id, at, ok := ids.Parse(p.LastEventID)
		if !ok {
			return tessera.Invalid("last_event_id", "Last-Event-ID must be the id of an event this server sent")
		}
		st.cursor, st.cursorAt = id, at
		if at.Before(now.Add(-AuditWindow)) || at.After(now.Add(time.Minute)) {
			gap = &Gap{After: id, Reason: "the events after it are outside the 24 h the server keeps; read the state again (list the tasks) and follow from here"}
		}
	}
	if p.LastEventID == "" || gap != nil {
		st.restart(now)
	}
	release, err := s.takeStream(streamOwner(ctx, a))
	if err != nil {
		return err
	}
	defer release()
	if a != nil {
		// Audited once, as a keyed read: however long it stays open, a
		// stream writes no more than this.
		err := s.auditedRead(ctx, a, ns, ActEvents, func(_ store.Tx, ev *tessera.AuditEvent) error {
			ev.Target = "events"
			return nil
		})
		if err != nil {
			return err
		}
	}
	if err := sink.Open(); err != nil {
		return nil // the client went away
	}
	if gap != nil {
		gap.ID = st.cursor
		if err := sink.Gap(gap); err != nil {
			return nil
		}
	}
	if a == nil {
		resume := p.LastEventID
		if gap != nil {
			resume = ""
		}
		if seq, ok := s.public.join(s, resume); ok {
			defer s.public.leave()
			err = s.followPublic(ctx, seq, p, sink)
		} else {
			err = st.run(ctx)
		}
	} else {
		err = st.run(ctx)
	}
	if errors.Is(err, errClientGone) || ctx.Err() != nil {
		return nil
	}
	return err
}

// errClientGone ends a stream whose writes fail: the client went away.
var errClientGone = errors.New("the stream's client went away")

// eventLag is how far back a stream reads again for events that commit
// after one with a later id (store.EventOrder).
func (s *Service) eventLag() time.Duration {
	if o, ok := s.store.(watchedStore).Store.(store.EventOrder); ok {
		return o.EventLag()
	}
	return store.DefaultEventLag
}

// clientGroup is the request's grouped address, for the keyless streams'
// bound.
func clientGroup(ctx context.Context) string {
	if addr, ok := ctx.Value(clientKey{}).(netip.Addr); ok && addr.IsValid() {
		return GroupAddr(addr).String()
	}
	return ""
}

// streamer is one open stream.
type streamer struct {
	s      *Service
	a      *auth.Actor // nil: a keyless stream of public events
	ns     string
	sink   EventSink
	filter store.StreamFilter
	lag    time.Duration
	// cursor is the newest id sent (or where the stream began), made at
	// cursorAt; floor, when set, is the id no event below is sent (a
	// stream opened without a cursor starts now).
	cursor   string
	cursorAt time.Time
	floor    string
	// seen are the ids read within lag of the cursor, which a read that
	// looks back again must not send twice.
	seen map[string]time.Time
	// beats holds each leased task's last heartbeat sent, to coalesce.
	beats map[string]time.Time
}

// freshLookback is how far before its opening a stream without a cursor
// begins: a change that committed just before (or whose transaction was
// under way as it opened) is sent, not missed. A client that read the
// state and then opens a stream sees every change since; an event it
// already saw in what it read changes nothing.
const freshLookback = time.Second

// restart makes the stream begin now, from the events of the last
// moment on.
func (st *streamer) restart(now time.Time) {
	st.cursorAt = now.Add(-freshLookback)
	st.cursor = tessera.IDFloor(st.cursorAt)
	st.floor = st.cursor
	st.seen = nil
}

func (st *streamer) run(ctx context.Context) error {
	s := st.s
	keepAlive := time.NewTimer(s.cfg.StreamKeepAlive)
	defer keepAlive.Stop()
	for {
		// Subscribed before the read: a change committed between the read
		// and the wait wakes the wait.
		woken, unsubscribe := s.signals.subscribe(streamTopic(st.ns))
		var keyChanged, principalChanged <-chan struct{}
		unsubscribeKey, unsubscribePrincipal := func() {}, func() {}
		if st.a != nil {
			keyChanged, unsubscribeKey = s.signals.subscribe(streamKeyTopic(st.a.Key.ID))
			principalChanged, unsubscribePrincipal = s.signals.subscribe(streamPrincipalTopic(st.a.Principal.ID))
		}
		err := st.drain(ctx)
		if err == nil {
			err = st.wait(ctx, keepAlive, woken, keyChanged, principalChanged)
		}
		unsubscribe()
		unsubscribeKey()
		unsubscribePrincipal()
		if err != nil {
			return err
		}
		if st.a != nil {
			// Checked again after every wait, as a long-poll is (§4).
			if st.a, err = s.authorize(ctx, st.a, st.ns, ActEvents); err != nil {
				return err
			}
		}
	}
}

// wait waits for something to read, writing keep-alives meanwhile. It
// reads nothing itself: an idle stream costs the store nothing.
func (st *streamer) wait(ctx context.Context, keepAlive *time.Timer, woken, keyChanged, principalChanged <-chan struct{}) error {
	s := st.s
	var poll, expiry <-chan time.Time
	if l, ok := s.StoreListener(); ok && !l.Healthy {
		// Other nodes' changes may go unheard: look again now and then,
		// as long-polls do.
		t := time.NewTimer(deafPoll)
		defer t.Stop()
		poll = t.C
	}
	if st.a != nil && st.a.Key.ExpiresAt != nil {
		// A key's expiry ends its stream when it comes, idle or not: run
		// authorizes again after every wait.
		t := time.NewTicker(expiryCheck)
		defer t.Stop()
		expiry = t.C
	}
	for {
		select {
		case <-woken:
			return nil
		case <-keyChanged:
			return nil
		case <-principalChanged:
			return nil
		case <-poll:
			return nil
		case <-expiry:
			if !s.clock.Now().Before(*st.a.Key.ExpiresAt) {
				return nil
			}
		case <-keepAlive.C:
			if err := st.sink.KeepAlive(); err != nil {
				return errClientGone
			}
			keepAlive.Reset(s.cfg.StreamKeepAlive)
		case <-ctx.Done():
			return ctx.Err()
		case <-s.done:
			return errClientGone // the server is closing: end as if gone
		}
	}
}

// drain sends every event past the cursor, page by page, looking back lag
// for events that committed late, then flushes.
func (st *streamer) drain(ctx context.Context) error {
	s := st.s
	now := s.clock.Now()
	if st.cursorAt.Before(now.Add(-AuditWindow)) {
		// A reader so slow it fell out of the window is told so.
		gap := &Gap{After: st.cursor, Reason: "the stream fell more than 24 h behind; read the state again"}
		st.restart(now)
		gap.ID = st.cursor
		if err := st.sink.Gap(gap); err != nil {
			return errClientGone
		}
	}
	from := st.cursor
	if st.lag > 0 {
		if back := tessera.IDFloor(st.cursorAt.Add(-st.lag)); back < from {
			from = back
		}
	}
	if from < st.floor {
		from = st.floor
	}
	sent := 0
	for {
		f := st.filter
		f.After = from
		var page []store.StreamEvent
		s.streamReads.Add(1)
		err := s.store.View(ctx, func(tx store.Tx) (err error) {
			page, err = tx.AuditStream(ctx, f)
			return err
		})
		if err != nil {
			return err
		}
		for i := range page {
			e := &page[i]
			from = e.ID
			if !st.fresh(e) {
				continue
			}
			if !st.coalesce(e) {
				continue
			}
			ev := eventOf(e, st.a == nil)
			if err := st.sink.Event(&ev); err != nil {
				return errClientGone
			}
			sent++
		}
		if len(page) < f.Limit {
			break
		}
	}
	st.forget()
	if sent > 0 {
		if err := st.sink.Flush(); err != nil {
			return errClientGone
		}
	}
	return nil
}

// fresh reports whether e was not read before, and moves the cursor.
func (st *streamer) fresh(e *store.StreamEvent) bool {
	if st.lag > 0 {
		if _, ok := st.seen[e.ID]; ok {
			return false
		}
		if st.seen == nil {
			st.seen = map[string]time.Time{}
		}
		st.seen[e.ID] = e.Time
	} else if e.ID <= st.cursor {
		return false
	}
	if e.ID > st.cursor {
		st.cursor, st.cursorAt = e.ID, e.Time
	}
	return true
}

// forget drops the ids no read will look back at again.
func (st *streamer) forget() {
	horizon := st.cursorAt.Add(-st.lag)
	for id, at := range st.seen {
		if at.Before(horizon) {
			delete(st.seen, id)
		}
	}
}

// coalesce reports whether e is to be sent: a heartbeat is, at most once
// per task per HeartbeatEvery; anything else about a task is, and makes
// its next heartbeat news again.
func (st *streamer) coalesce(e *store.StreamEvent) bool {
	if e.Action != ActHeartbeat || e.State != tessera.StateLeased {
		if st.beats != nil {
			delete(st.beats, e.TaskID)
		}
		return true
	}
	if last, ok := st.beats[e.TaskID]; ok && e.Time.Sub(last) < HeartbeatEvery {
		return false
	}
	if st.beats == nil {
		st.beats = map[string]time.Time{}
	}
	if len(st.beats) >= maxBeats {
		for id, at := range st.beats {
			if e.Time.Sub(at) >= HeartbeatEvery {
				delete(st.beats, id)
			}
		}
	}
	st.beats[e.TaskID] = e.Time
	return true
}
