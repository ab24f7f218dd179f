package httpapi_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/httpapi"
)

// Issue 33 item 2: three keyless clients reopening connections as fast
// as they could held the server at its connection cap, and 13 of 22
// keyed GET /v1/me failed. Under the same kind of flood, at least 95 % of
// keyed requests must succeed.

// floodTally counts what a keyless flood got, request by request.
type floodTally struct {
	sent        atomic.Int64 // requests written on a connection
	served      atomic.Int64 // answered 200
	limited     atomic.Int64 // 429: the address's keyless rate
	connRefused atomic.Int64 // 429 at connect: the address's connections
	unavailable atomic.Int64 // 503: the server's connection cap
	failed      atomic.Int64 // no answer: reset, closed, timed out
	silent      atomic.Int64 // connections opened to send nothing
	stalled     atomic.Int64 // silent ones without an answer when let go
	dialFailed  atomic.Int64
}

func (f *floodTally) String() string {
	return fmt.Sprintf("%d keyless requests and %d silent connections: %d served, %d refused 429 for the keyless rate, %d connections refused 429 for the address's connections, %d refused 503, %d unanswered, %d silent ones held unanswered (%d dials failed)",
		f.sent.Load(), f.silent.Load(), f.served.Load(), f.limited.Load(), f.connRefused.Load(), f.unavailable.Load(), f.failed.Load(), f.stalled.Load(), f.dialFailed.Load())
}

// reset closes c with a reset: no TIME_WAIT, or the flood would run out
// of ports.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
}

// hammer opens connections from src as fast as it can until stop, and on
// each sends keyless GET /v1/health requests, one after another, until the
// server closes it.
func hammer(url, src string, stop <-chan struct{}, tally *floodTally) {
	for !stopped(stop) {
		c, err := dialFrom(url, src)
		if err != nil {
			tally.dialFailed.Add(1)
			continue
		}
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		br := bufio.NewReader(c)
		for keylessRequest(c, br, tally) && !stopped(stop) {
		}
		reset(c)
	}
}

// stall opens connections from src as fast as it can until stop and
// sends nothing on them — a connection that has sent nothing is no idle
// keep-alive connection the server may reclaim — keeping up to keep and
// resetting the oldest. A connection is counted when it is let go: held,
// or refused (its answer long since arrived).
func stall(url, src string, keep int, stop <-chan struct{}, tally *floodTally) {
	var held []net.Conn
	release := func(c net.Conn) {
		_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
		if res, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
			body, _ := io.ReadAll(res.Body)
			tally.count(res.StatusCode, body)
		} else {
			tally.stalled.Add(1)
		}
		reset(c)
	}
	defer func() {
		for _, c := range held {
			release(c)
		}
	}()
	for !stopped(stop) {
		c, err := dialFrom(url, src)
		if err != nil {
			tally.dialFailed.Add(1)
			continue
		}
		tally.silent.Add(1)
		held = append(held, c)
		if len(held) > keep {
			release(held[0])
			held = held[1:]
		}
	}
}

func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// keylessRequest sends req on c and counts its answer; it reports whether
// c is still open for another.
func keylessRequest(c net.Conn, br *bufio.Reader, tally *floodTally) bool {
	tally.sent.Add(1)
	var res *http.Response
	_, err := io.WriteString(c, "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
	if err == nil {
		res, err = http.ReadResponse(br, nil)
	}
	if err != nil {
		tally.failed.Add(1)
		return false
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	tally.count(res.StatusCode, body)
	return !res.Close
}

// count counts an answer by what it refused, if anything.
func (f *floodTally) count(status int, body []byte) {
	switch {
	case status == 200:
		f.served.Add(1)
	case status == 429 && strings.Contains(string(body), "requests without a key"):
		f.limited.Add(1)
	case status == 429:
		f.connRefused.Add(1)
	case status == 503:
		f.unavailable.Add(1)
	default:
		f.failed.Add(1)
	}
}

// keyedTally counts a keyed client's requests and keeps its first
// failures to show.
type keyedTally struct {
	ok, failed int
	failures   []string
}

// keyedRequests makes n GET /v1/me with key through client, one after
// another, each given 10 s.
func keyedRequests(url, key string, client *http.Client, n int) keyedTally {
	var k keyedTally
	for range n {
		req, _ := http.NewRequest("GET", url+"/v1/me", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == 200 {
				k.ok++
				continue
			}
			err = fmt.Errorf("status %d", res.StatusCode)
		}
		k.failed++
		if len(k.failures) < 5 {
			k.failures = append(k.failures, err.Error())
		}
	}
	return k
}

func TestKeyedRequestsSurviveAKeylessFlood(t *testing.T) {
	const (
		burst      = 40
		floodAddrs = 3
		stallers   = 3  // per address
		keep       = 24 // stalled connections each keeps: 216 wanted, over the cap
		keyed      = 100
	)
	s := limitedServer(t, func(c *httpapi.Config) {
		c.MaxConns, c.ConnsPerAddress = 128, 16
		// A rate that refills nothing within the test, so the keyless
		// requests served are exactly the bursts.
		c.KeylessRate, c.KeylessBurst = 0.001, burst
	})
	agent, _ := s.newKey("agent", "namespace:main", "read")

	var tally floodTally
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for a := range floodAddrs {
		src := fmt.Sprintf("127.0.0.%d", 10+a)
		for range stallers {
			wg.Go(func() { stall(s.URL, src, keep, stop, &tally) })
		}
		wg.Go(func() { hammer(s.URL, src, stop, &tally) })
	}
	// The flood is on once it has sent ten times what it holds.
	for tally.sent.Load() < 10*floodAddrs*stallers*keep {
		if tally.dialFailed.Load() > 1000 {
			close(stop)
			t.Fatalf("the flood cannot dial (the test needs 127.0.0.0/8 on the loopback interface): %v", &tally)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// One keyed client opens a connection per request (as curl does), one
	// keeps its connection alive (as a worker's pool does).
	var fresh, pooled keyedTally
	var kw sync.WaitGroup
	kw.Go(func() {
		fresh = keyedRequests(s.URL, agent, &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}, keyed)
	})
	kw.Go(func() {
		pooled = keyedRequests(s.URL, agent, &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}, keyed)
	})
	kw.Wait()
	close(stop)
	wg.Wait()

	t.Logf("flood from %d addresses: %v", floodAddrs, &tally)
	t.Logf("keyed, a connection each: %d/%d succeeded %q; keyed, kept alive: %d/%d succeeded %q",
		fresh.ok, keyed, fresh.failures, pooled.ok, keyed, pooled.failures)
	for name, k := range map[string]keyedTally{"a connection each": fresh, "kept alive": pooled} {
		if k.ok*100 < keyed*95 {
			t.Errorf("keyed, %s: %d/%d succeeded under the flood, want ≥ 95 %%: %q", name, k.ok, keyed, k.failures)
		}
	}
	// Each flooding address had its burst served and no more; the rest
	// was refused with 429, by request or by connection.
	if got := tally.served.Load(); got != floodAddrs*burst {
		t.Errorf("keyless requests served: %d, want exactly %d (%d addresses × a burst of %d)", got, floodAddrs*burst, floodAddrs, burst)
	}
	if tally.limited.Load() == 0 || tally.connRefused.Load() == 0 {
		t.Errorf("the flood met no limit: %v", &tally)
	}
}
