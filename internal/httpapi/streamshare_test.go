package httpapi_test

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/app"
	"github.com/tessera-dev/tessera/internal/core"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// Anonymous sessions together, and readers without a key together, hold
// at most a quarter of a node's streams each, a session fewer than a key;
// a key's stream always finds room (issue 42: 512 sessions took all 4,096
// slots and the admin's own stream got 429).
func TestAnonymousStreamsLeaveRoomForKeys(t *testing.T) {
	s, _ := serverWith(t, t.TempDir(), tessera.NewManualClock(time.Now()), func(o *app.Options) {
		o.Core.Sessions = core.DefaultSessionConfig()
		o.Core.MaxStreams = 16 // a quarter: 4
		o.HTTP.TrustProxy = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	})
	say := func(r *response, want string) {
		t.Helper()
		wantError(t, r, 429, "rate_limited", "")
		if !strings.Contains(string(r.Body), want) {
			t.Errorf("refused with %s, want it to say %q", r.Body, want)
		}
	}
	a, b, c := s.mint("198.51.100.1"), s.mint("198.51.100.2"), s.mint("198.51.100.3")
	nsPathOf := func(sess core.Session) string { return "/ns/" + sess.Namespace + "/v1/events" }
	s.openStream(nsPathOf(a), a.Key)
	s.openStream(nsPathOf(a), a.Key)
	_, r := s.tryStream(nsPathOf(a), a.Key)
	say(r, "open with this session already")
	s.openStream(nsPathOf(b), b.Key)
	s.openStream(nsPathOf(b), b.Key)
	_, r = s.tryStream(nsPathOf(c), c.Key)
	say(r, "anonymous sessions hold 4 event streams")

	for _, addr := range []string{"203.0.113.1", "203.0.113.2", "203.0.113.3", "203.0.113.4"} {
		s.openStream("/v1/events", "", from(addr)...)
	}
	_, r = s.tryStream("/v1/events", "", from("203.0.113.5")...)
	say(r, "streams without a key hold 4")

	// Half the node taken by the anonymous, half left to keys: a key's
	// whole allowance of streams opens.
	keyed, _ := s.newKey("agent", "namespace:main", "read")
	for range core.DefaultStreamsPerKey {
		s.openStream("/v1/events", keyed)
	}
}

// A key's expiry ends its open stream when it comes, though nothing
// happens in its namespace (issue 42 saw one 47 s past its expiry still
// getting keep-alives): the stream says unauthorized and ends.
func TestAnExpiredKeysStreamEnds(t *testing.T) {
	s := newTestServer(t)
	_, pid := s.newKey("agent", "namespace:main", "read")
	expires := s.Clock.Now().Add(time.Minute)
	var k struct {
		Key string `json:"key"`
	}
	s.must(201, "POST", "/v1/admin/keys", adminKey, map[string]any{"principal_id": pid, "scopes": []string{"namespace:main", "read"},
		"expires_at": expires}).decode(t, &k)
	st := s.openStream("/v1/events", k.Key)
	s.Clock.Advance(2 * time.Minute)
	m := st.next()
	if m.Event != "error" || !strings.Contains(m.Data, `"unauthorized"`) {
		t.Fatalf("an expired key's stream sent %+v, want an unauthorized error", m)
	}
	select {
	case <-st.ended:
	case <-time.After(5 * time.Second):
		t.Fatal("an expired key's stream stayed open 5 s after its expiry was seen")
	}
}

// The board's streams share one reader per node (issue 42): with twenty
// open, a public change costs the store one read of the trail, as with
// one, and every stream gets it; a stream filtered by queue gets its
// queue's only, and one that resumes from an event gets what followed.
func TestTheBoardsStreamsShareOneReader(t *testing.T) {
	s, _ := serverWith(t, t.TempDir(), tessera.NewManualClock(time.Now()), func(o *app.Options) {
		o.HTTP.TrustProxy = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	})
	public := func(title, queue string) tessera.Task {
		return s.enqueue("main", adminKey, map[string]any{"title": title, "queue": queue, "public": true})
	}
	first := s.openStream("/v1/events", "", from("203.0.113.1")...)
	warm := public("warm", "mail") // the reader's first read is done once this arrives
	if e := first.event(); e.TaskID != warm.ID {
		t.Fatalf("first stream: %+v", e)
	}
	reads := s.Core.StreamReads()
	one := public("one stream", "mail")
	seen := first.event()
	if seen.TaskID != one.ID || seen.By != "" {
		t.Fatalf("first stream: %+v", seen)
	}
	if n := s.Core.StreamReads() - reads; n != 1 {
		t.Fatalf("a change read the trail %d times for one stream, want 1", n)
	}

	s.Clock.Advance(2 * time.Second) // past the moment a new stream looks back
	streams := []*sseStream{first}
	for i := range 19 {
		streams = append(streams, s.openStream("/v1/events", "", from(fmt.Sprintf("203.0.113.%d", 10+i))...))
	}
	mail := s.openStream("/v1/events?queue=mail", "", from("203.0.113.50")...)
	resumed := s.openStream("/v1/events", "", append(from("203.0.113.51"), "Last-Event-ID", seen.ID)...)
	if got := s.Core.OpenStreamsByHolder()["keyless"]; got != 22 {
		t.Fatalf("%d keyless streams open, want 22", got)
	}
	reads = s.Core.StreamReads()
	build := public("twenty streams", "build")
	for i, st := range append(streams, resumed) {
		if e := st.event(); e.TaskID != build.ID {
			t.Fatalf("stream %d: %+v, want %s", i, e, build.ID)
		}
	}
	if n := s.Core.StreamReads() - reads; n != 1 {
		t.Fatalf("a change read the trail %d times for 22 streams, want 1: one reader for them all", n)
	}
	last := public("mail again", "mail")
	if e := mail.event(); e.TaskID != last.ID {
		t.Fatalf("the mail stream: %+v, want only mail's %s", e, last.ID)
	}
	for _, st := range append(streams, resumed) {
		if e := st.event(); e.TaskID != last.ID {
			t.Fatalf("%+v, want %s", e, last.ID)
		}
		st.quiet()
	}
	mail.quiet()
}
