package tessera

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"time"
)

// crockford is the ULID alphabet: no I, L, O or U, so ids read aloud safely.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

func encodeBase32(raw [16]byte) string {
	// 128 bits as 26 characters: the first carries 3 bits, the rest 5 each.
	hi := binary.BigEndian.Uint64(raw[0:8])
	lo := binary.BigEndian.Uint64(raw[8:16])
	var out [26]byte
	for i := 25; i >= 0; i-- {
		out[i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out[:])
}

// RandomToken returns n random bytes as unpadded URL-safe base64.
func RandomToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// RandomAlnum returns n random characters from [a-z0-9] or, with upper, from
// [A-Za-z0-9]. Key ids and secrets use it so they survive any shell quoting.
func RandomAlnum(n int, upper bool) string {
	alphabet := "abcdefghijklmnopqrstuvwxyz0123456789"
	if upper {
		alphabet += "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	}
	// Rejection sampling keeps every symbol equally likely.
	limit := byte(256 - 256%len(alphabet))
	out := make([]byte, 0, n)
	var buf [64]byte
	for len(out) < n {
		_, _ = rand.Read(buf[:])
		for _, b := range buf {
			if b < limit && len(out) < n {
				out = append(out, alphabet[int(b)%len(alphabet)])
			}
		}
	}
	return string(out)
}

// IDFloor returns the smallest ULID of the millisecond t: every id made at
// or after t sorts at or above it, so a time bound becomes an id bound.
func IDFloor(t time.Time) string {
	var raw [16]byte
	ms := uint64(t.UnixMilli())
	binary.BigEndian.PutUint16(raw[0:2], uint16(ms>>32))
	binary.BigEndian.PutUint32(raw[2:6], uint32(ms))
	return encodeBase32(raw)
}
