package httpapi_test

import (
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
