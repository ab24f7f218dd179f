package core

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// The board's stream (a keyless GET /v1/events: main's public events) is
// one reader per node, not one per viewer: a crowd watching the board
// costs the store one read per change, however large it is (issue 42).
// The feed's reader is a streamer like any stream's, whose sink keeps the
// newest events it sent, in order; each keyless stream follows that list
// from where it joined, filtering by queue or task itself. The reader
// runs while a keyless stream is open. A stream that resumes from an
// event the list does not hold reads the trail itself, as a keyed stream
// does.

// feedKeep is how many of the newest events the feed holds for streams
// that join or fall behind.
const feedKeep = 1024

// publicFeed is the node's reader of main's public events and what it
// read.
type publicFeed struct {
	mu      sync.Mutex
	streams int                // keyless streams following
	stop    context.CancelFunc // ends the reader; nil while none runs
	entries []feedEntry        // the newest, oldest first
	next    int64              // the seq the next entry gets
	changed chan struct{}      // closed when entries grow or the reader ends
	err     error              // why the reader ended, for its followers
}

// feedEntry is an event (or a gap) the feed's reader sent, numbered in
// the order it sent them.
type feedEntry struct {
	seq int64
	ev  Event
	gap *Gap
}

// join counts a keyless stream in, starting the reader when none runs,
// and says which entry the stream takes first: the first after
// lastEventID when the feed holds it; else, with from false, none — the
// stream reads the trail itself. A stream that begins now (lastEventID
// "") takes what arrived since freshLookback ago.
func (f *publicFeed) join(s *Service, lastEventID string) (from int64, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stop == nil {
		if lastEventID != "" {
			return 0, false // no reader, so nothing held to resume from
		}
		f.start(s)
	}
	if lastEventID == "" {
		from = f.next
		since := s.clock.Now().Add(-freshLookback)
		for i := len(f.entries) - 1; i >= 0 && f.entries[i].gap == nil && !f.entries[i].ev.Time.Before(since); i-- {
			from = f.entries[i].seq
		}
	} else {
		i := len(f.entries) - 1
		for i >= 0 && f.entries[i].ev.ID != lastEventID {
			i--
		}
		if i < 0 {
			return 0, false
		}
		from = f.entries[i].seq + 1
	}
	f.streams++
	return from, true
}

// start runs a reader from now, with the entries of an earlier one
// dropped: nobody follows them, and the new reader may send some again.
// Called with f.mu held.
func (f *publicFeed) start(s *Service) {
	ctx, cancel := context.WithCancel(context.Background())
	f.stop, f.err, f.entries = cancel, nil, nil
	if f.changed == nil {
		f.changed = make(chan struct{})
	}
	st := &streamer{s: s, ns: tessera.MainNamespace, sink: feedSink{f}, lag: s.eventLag(),
		filter: store.StreamFilter{Namespace: tessera.MainNamespace, Actions: streamActions, Public: true, Limit: streamPage}}
	st.restart(s.clock.Now())
	go func() {
		err := st.run(ctx)
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.err == nil && ctx.Err() == nil {
			// The store failed (or the server closes): every follower
			// ends, and the next stream to join starts a reader anew.
			f.err, f.stop = err, nil
			cancel()
			f.wake()
		}
	}()
}

// leave counts a keyless stream out; the last one stops the reader.
func (f *publicFeed) leave() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.streams--; f.streams == 0 && f.stop != nil {
		f.stop()
		f.stop = nil
	}
}

// wake tells the followers to look. Called with f.mu held.
func (f *publicFeed) wake() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// since returns the entries from seq on, whether some before them were
// dropped meanwhile, what to wait on for more, and why the reader ended.
func (f *publicFeed) since(seq int64) (entries []feedEntry, dropped bool, changed <-chan struct{}, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.entries) > 0 && seq < f.entries[0].seq {
		dropped, seq = true, f.entries[0].seq
	}
	if n := len(f.entries); n > 0 && seq <= f.entries[n-1].seq {
		entries = append(entries, f.entries[seq-f.entries[0].seq:]...)
	}
	return entries, dropped, f.changed, f.err
}

// feedSink is the reader's sink: what it sends joins the feed's entries,
// and its flush wakes the followers.
type feedSink struct{ f *publicFeed }

func (k feedSink) add(e feedEntry) {
	f := k.f
	f.mu.Lock()
	defer f.mu.Unlock()
	e.seq = f.next
	f.next++
	f.entries = append(f.entries, e)
	if len(f.entries) >= 2*feedKeep {
		f.entries = append(f.entries[:0:0], f.entries[len(f.entries)-feedKeep:]...)
	}
}

func (k feedSink) Open() error      { return nil }
func (k feedSink) KeepAlive() error { return nil }
func (k feedSink) Event(e *Event) error {
	k.add(feedEntry{ev: *e})
	return nil
}
func (k feedSink) Gap(g *Gap) error {
	k.add(feedEntry{gap: g})
	return k.Flush()
}
func (k feedSink) Flush() error {
	k.f.mu.Lock()
	k.f.wake()
	k.f.mu.Unlock()
	return nil
}

// followPublic sends a keyless stream the feed's entries from seq on
// that match p, until ctx ends, the server closes or the reader fails.
func (s *Service) followPublic(ctx context.Context, seq int64, p StreamParams, sink EventSink) error {
	f := &s.public
	keepAlive := time.NewTimer(s.cfg.StreamKeepAlive)
	defer keepAlive.Stop()
	for {
		entries, dropped, changed, err := f.since(seq)
		if dropped && len(entries) > 0 {
			// Too slow a reader: what it missed is told, not sent.
			last := entries[len(entries)-1]
			id := last.ev.ID
			if last.gap != nil {
				id = last.gap.ID
			}
			gap := &Gap{ID: id, Reason: fmt.Sprintf("the stream fell more than %d events behind; read the state again and follow from here", feedKeep)}
			if err := sink.Gap(gap); err != nil {
				return errClientGone
			}
			seq, entries = last.seq+1, nil
		}
		sent := 0
		for i := range entries {
			e := &entries[i]
			seq = e.seq + 1
			var werr error
			switch {
			case e.gap != nil:
				werr = sink.Gap(e.gap)
			case (p.Queue == "" || e.ev.Queue == p.Queue) && (p.TaskID == "" || e.ev.TaskID == p.TaskID):
				werr = sink.Event(&e.ev)
			default:
				continue
			}
			if werr != nil {
				return errClientGone
			}
			sent++
		}
		if sent > 0 {
			if err := sink.Flush(); err != nil {
				return errClientGone
			}
		}
		if err != nil && len(entries) == 0 {
			return err
		}
		for waiting := true; waiting; {
			select {
			case <-changed:
				waiting = false
			case <-keepAlive.C:
				if err := sink.KeepAlive(); err != nil {
					return errClientGone
				}
				keepAlive.Reset(s.cfg.StreamKeepAlive)
			case <-ctx.Done():
				return ctx.Err()
			case <-s.done:
				return errClientGone
			}
		}
	}
}
