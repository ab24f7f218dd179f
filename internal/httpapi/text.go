package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"strings"
	"unicode/utf8"
)

// Free text on the pages — titles, record values — is anyone's: html/
// template escapes it as markup, and these say it as it is. A value is
// shown as its JSON text, not as the escapes an encoder put in it; a
// bidirectional control character is shown as what it is, not obeyed, so
// "\u202egnp.exe" cannot pass for "exe.png".

// isBidiControl reports whether r is an embedding, override or isolate
// control (U+202A–U+202E, U+2066–U+2069): invisible, and able to reorder
// the text after it.
func isBidiControl(r rune) bool {
	return r >= 0x202A && r <= 0x202E || r >= 0x2066 && r <= 0x2069
}

// shown is s as HTML text, each bidi control written as a marked escape
// (\u202E) instead of the character.
func shown(s string) template.HTML {
	var b strings.Builder
	start := 0
	for i, r := range s {
		if !isBidiControl(r) {
			continue
		}
		b.WriteString(template.HTMLEscapeString(s[start:i]))
		fmt.Fprintf(&b, `<span class="bidi" title="a bidirectional control character, shown instead of obeyed">\u%04X</span>`, r)
		start = i + utf8.RuneLen(r)
	}
	b.WriteString(template.HTMLEscapeString(s[start:]))
	return template.HTML(b.String())
}

// jsonText is a JSON value indented for reading, each string written as
// its text: an escape of <, > or & (what encoding/json puts in a Go
// client's values), or of any other printable character, comes out as the
// character. Keys keep their order. A value that does not parse is shown
// as it is.
func jsonText(v json.RawMessage) string {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	type level struct {
		object bool
		n      int // tokens in it so far: in an object, keys and values
	}
	var open []level
	newline := func() {
		b.WriteByte('\n')
		b.WriteString(strings.Repeat("  ", len(open)))
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return string(v)
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			closed := open[len(open)-1]
			open = open[:len(open)-1]
			if closed.n > 0 {
				newline()
			}
			b.WriteByte(byte(d))
			continue
		}
		if len(open) > 0 {
			top := &open[len(open)-1]
			switch {
			case top.object && top.n%2 == 1:
				b.WriteString(": ")
			case top.n > 0:
				b.WriteByte(',')
				newline()
			default:
				newline()
			}
			top.n++
		}
		switch t := tok.(type) {
		case json.Delim:
			b.WriteByte(byte(t))
			open = append(open, level{object: t == '{'})
		case string:
			_ = enc.Encode(t)
			b.Truncate(b.Len() - 1) // Encode's newline
		case json.Number:
			b.WriteString(string(t))
		case bool:
			fmt.Fprint(&b, t)
		case nil:
			b.WriteString("null")
		}
	}
	return b.String()
}
