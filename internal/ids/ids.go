// Package ids makes Tessera's identifiers: ULIDs from
// github.com/oklog/ulid/v2 — 48 bits of milliseconds then 80 random bits,
// 26 Crockford base32 characters, so ids sort by the time they were made.
//
// It lives apart from internal/tessera, the domain vocabulary, because
// that package imports only the standard library. tessera.IDFloor (the
// smallest id of a millisecond, which the store uses to turn time windows
// into id ranges) stays there: it is an encoding, not a generator, and a
// test here holds the two encodings to each other.
package ids

import (
	"crypto/rand"
	"io"
	"time"

	"github.com/oklog/ulid/v2"
)

// entropy makes ids monotonic within a millisecond: a later id of the
// same millisecond is the earlier one plus a random increment. A new
// millisecond, earlier or later, draws fresh randomness, so an id always
// encodes the time it was given, even if the clock stepped back:
// retention and audit windows compare ids as times.
var entropy io.Reader = &ulid.LockedMonotonicReader{MonotonicReader: ulid.Monotonic(rand.Reader, 0)}

// New returns a ULID for the time now.
func New(now time.Time) string {
	ms := ulid.Timestamp(now)
	id, err := ulid.New(ms, entropy)
	if err != nil {
		// The monotonic increments overflowed 80 bits within one
		// millisecond (some 2^48 ids in it): give up order, not time.
		id = ulid.MustNew(ms, rand.Reader)
	}
	return id.String()
}

// Parse reads a ULID in any letter case: its canonical form (upper case,
// as New makes them and the store orders them) and the time it encodes.
// ok is false for anything that is not one.
func Parse(id string) (canonical string, made time.Time, ok bool) {
	u, err := ulid.ParseStrict(id)
	if err != nil {
		return "", time.Time{}, false
	}
	return u.String(), ulid.Time(u.Time()).UTC(), true
}
