package runner

import (
	"testing"
	"unicode/utf8"
)

// A command's output, whatever its bytes, becomes valid UTF-8 within its
// bound: the stdout prefix at most n bytes before replacements, the
// stderr tail never longer than what it was given.
func FuzzOutputText(f *testing.F) {
	f.Add([]byte("hello\nworld\n"), 5)
	f.Add([]byte("\xff\xfe€€€"), 4)
	f.Add([]byte("é"), 1)
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		if n < 0 || n > 1<<16 {
			return
		}
		p := validPrefix(b, n)
		if !utf8.ValidString(p) {
			t.Fatalf("validPrefix(%q, %d) = %q, not UTF-8", b, n, p)
		}
		tl := tail(b)
		if !utf8.ValidString(tl) || len(tl) > len(b) {
			t.Fatalf("tail(%q) = %q", b, tl)
		}
	})
}
