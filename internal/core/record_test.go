package core

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tessera-dev/tessera/internal/input"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// Values are measured compacted and bounded at 256 KiB.
func TestRecordValueBound(t *testing.T) {
	str := func(n int) json.RawMessage { return json.RawMessage(`"` + strings.Repeat("x", n-2) + `"`) }
	for _, c := range []struct {
		value json.RawMessage
		ok    bool
	}{
		{str(MaxValueLen), true},
		{str(MaxValueLen + 1), false},
		{json.RawMessage("[1,   2]" + strings.Repeat(" ", MaxValueLen)), true},
		{json.RawMessage("null"), true},
		{nil, false},
	} {
		p := PutRecordParams{Value: c.value}
		err := input.Check(&p)
		var v json.RawMessage
		if err == nil {
			v, err = p.value()
		}
		if (err == nil) != c.ok {
			t.Errorf("value of %d bytes: %v, want ok=%v", len(c.value), err, c.ok)
		}
		if err == nil && len(v) > MaxValueLen {
			t.Errorf("stored %d bytes", len(v))
		}
	}
}

func TestParseSum(t *testing.T) {
	hex := strings.Repeat("ab", 32)
	for in, want := range map[string]string{
		hex:                              hex,
		"sha256:" + hex:                  hex,
		"SHA256:" + strings.ToUpper(hex): hex,
		hex[:63]:                         "",
		hex + "0":                        "",
		"sha1:" + hex:                    "",
		strings.Repeat("g", 64):          "",
		"sha256:sha256:" + hex:           "",
	} {
		got, err := ParseSum("sha256", in)
		if got != want || (want == "") != (err != nil) {
			t.Errorf("ParseSum(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// A listing page stops at its limit, or once it carries store.PageBytes of
// values, whichever comes first, and always holds at least one record.
func TestCutPage(t *testing.T) {
	recs := func(sizes ...int) []tessera.Record {
		var out []tessera.Record
		for i, n := range sizes {
			out = append(out, tessera.Record{Key: fmt.Sprint(i), Value: make(json.RawMessage, n)})
		}
		return out
	}
	for _, c := range []struct {
		sizes []int
		limit int
		n     int
		more  bool
	}{
		{[]int{1, 1, 1}, 2, 2, true},
		{[]int{1, 1}, 2, 2, false},
		{[]int{1}, 2, 1, false},
		{nil, 2, 0, false},
		{[]int{store.PageBytes + 5, 1}, 10, 1, true},
		{[]int{store.PageBytes / 2, store.PageBytes / 2, 1}, 10, 2, true},
		{[]int{store.PageBytes/2 - 1, store.PageBytes / 2, 1}, 10, 3, false},
	} {
		page, more := cutPage(recs(c.sizes...), c.limit)
		if len(page) != c.n || more != c.more {
			t.Errorf("cut %v at %d: %d records, more %v; want %d, %v", c.sizes, c.limit, len(page), more, c.n, c.more)
		}
	}
}
