package input

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"unicode"

	"github.com/tessera-dev/tessera/internal/tessera"
)

// Bound is what one field may hold: a range for numbers; a length (bytes
// of a string or of a JSON value, items of a list); a set of values; a
// format; one line of text. A zero Bound allows anything of the field's
// type. Bounds are declared with the constructors below and read by Check
// and Keywords.
//
// An optional field (omitempty) holding its zero value is absent: it is not
// checked and takes the Default, if any. A field where an explicit zero
// must be refused is a pointer.
type Bound struct {
	ranged bool
	lo, hi int64
	minLen int
	maxLen int // 0: unbounded
	// isJSON bounds a JSON value's encoded size, not a string's length.
	isJSON    bool
	compacted bool
	// tooLarge answers a length over maxLen payload_too_large: bytes
	// carried as text, which are too many rather than malformed.
	tooLarge bool
	enum     []string
	format   *Format
	line     bool
	// missing, when set, makes a value of the wrong shape not_found of
	// this kind: an id that cannot exist.
	missing string
	// orElse, when set, is the answer to any value out of bounds.
	orElse *tessera.Error
	def    any
	doc    string
	item   *Bound
}

// Range bounds a number to lo–hi.
func Range(lo, hi int64) Bound { return Bound{ranged: true, lo: lo, hi: hi} }

// AtLeast bounds a number from below only.
func AtLeast(lo int64) Bound { return Bound{ranged: true, lo: lo, hi: 1<<63 - 1} }

// Text bounds a string to max bytes.
func Text(max int) Bound { return Bound{maxLen: max} }

// Encoded bounds bytes carried as text (base64) to max characters; more
// is payload_too_large.
func Encoded(max int) Bound { return Bound{maxLen: max, tooLarge: true} }

// Length bounds a string to min–max bytes.
func Length(min, max int) Bound { return Bound{minLen: min, maxLen: max} }

// Line is one line of text (no control characters) of min–max bytes.
func Line(min, max int) Bound { return Bound{minLen: min, maxLen: max, line: true} }

// Enum allows only the given values.
func Enum(values ...string) Bound { return Bound{enum: values} }

// Match holds a string to a format.
func Match(f *Format) Bound { return Bound{format: f, maxLen: f.maxLen} }

// ID is an identifier's shape; a value of another shape cannot name
// anything, so it is not_found of kind, not a bad request.
func ID(kind string) Bound { return Bound{format: IDFormat, maxLen: IDFormat.maxLen, missing: kind} }

// JSON bounds a JSON value to max bytes as sent.
func JSON(max int) Bound { return Bound{maxLen: max, isJSON: true} }

// CompactJSON bounds a JSON value to max bytes once compacted.
func CompactJSON(max int) Bound { return Bound{maxLen: max, isJSON: true, compacted: true} }

// List bounds a list to min–max items, each held to item.
func List(min, max int, item Bound) Bound { return Bound{minLen: min, maxLen: max, item: &item} }

// Else makes e the answer to any value out of b: a lease token of the
// wrong shape is no lease (lease_lost), not a bad request.
func (b Bound) Else(e *tessera.Error) Bound { b.orElse = e; return b }

// Default is the value an absent field takes.
func (b Bound) Default(v any) Bound { b.def = v; return b }

// Doc describes the field.
func (b Bound) Doc(s string) Bound { b.doc = s; return b }

// Format is a pattern a string must match.
type Format struct {
	// Pattern is the regular expression, as JSON Schema's pattern.
	Pattern string
	re      *regexp.Regexp
	maxLen  int
}

// NewFormat compiles a format. maxLen is the longest string it matches,
// for the schemas' maxLength.
func NewFormat(pattern string, maxLen int) *Format {
	return &Format{Pattern: pattern, re: regexp.MustCompile(pattern), maxLen: maxLen}
}

// Match reports whether s has the format.
func (f *Format) Match(s string) bool { return f.re.MatchString(s) }

// The formats every operation shares.
var (
	// NameFormat is the rule of queues, labels and buckets: safe in URLs,
	// logs and metric labels.
	NameFormat = NewFormat(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$`, 64)
	// KeyFormat is a record key's: a few more punctuation characters, for
	// dates, versions and emails; never '/', so a key is one path segment,
	// and never a leading '.', so "." and ".." are no keys.
	KeyFormat    = NewFormat(`^[A-Za-z0-9_][A-Za-z0-9_.:=@-]{0,255}$`, 256)
	PrefixFormat = NewFormat(`^[A-Za-z0-9_.:=@-]{0,256}$`, 256)
	// NamespaceFormat is SPEC §1's namespace rule.
	NamespaceFormat = NewFormat(tessera.NamespacePattern, 63)
	SHA256Format    = NewFormat(`^([Ss][Hh][Aa]256:)?[0-9A-Fa-f]{64}$`, 71)
	IDFormat        = NewFormat(`^[0-9A-Za-z]{1,64}$`, 64)
	ScopeFormat     = NewFormat(`^(admin|read|enqueue|claim|write|namespace:(\*|[a-z0-9][a-z0-9-]{0,62}))$`, 73)
)

// oneLine is Line's rule as a pattern: no C0, DEL or C1 control.
const oneLine = `^[^\x00-\x1f\x7f-\x9f]*$`

// Check holds every field of *v (a pointer to an input struct) to its
// bound, and gives absent optional fields their default. A field at fault
// is named in the error as a client wrote it: tasks[3].title.
func Check(v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return nil
	}
	t := TypeOf(rv.Type())
	if t == nil {
		return nil
	}
	return t.check(rv.Elem())
}

func (t *Type) check(v reflect.Value) error {
	for _, f := range t.Fields {
		if err := f.check(f.value(v), f.Name); err != nil {
			return err
		}
	}
	return nil
}

func (f *Field) check(v reflect.Value, name string) error {
	b := &f.Bound
	if v.IsZero() && !f.Required {
		if b.def != nil {
			setDefault(v, b.def)
		}
		return nil
	}
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	switch {
	case f.Elem != nil && v.Kind() == reflect.Struct:
		return within(name, f.Elem.check(v))
	case f.Elem != nil && v.Kind() == reflect.Slice:
		if err := b.checkLen(name, v.Len(), "items"); err != nil {
			return err
		}
		for i := range v.Len() {
			if err := f.Elem.check(v.Index(i)); err != nil {
				return within(fmt.Sprintf("%s[%d]", name, i), err)
			}
		}
		return nil
	}
	err := b.checkValue(name, v)
	if err != nil && b.orElse != nil {
		return b.orElse
	}
	return err
}

func setDefault(v reflect.Value, def any) {
	d := reflect.ValueOf(def)
	if v.Kind() == reflect.Pointer {
		p := reflect.New(v.Type().Elem())
		p.Elem().Set(d.Convert(v.Type().Elem()))
		v.Set(p)
		return
	}
	v.Set(d.Convert(v.Type()))
}

// checkValue holds one value (not a pointer) to b.
func (b *Bound) checkValue(name string, v reflect.Value) error {
	switch {
	case v.Type() == rawJSON:
		return b.checkJSON(name, v.Bytes())
	case v.Kind() == reflect.String:
		return b.checkString(name, v.String())
	case v.CanInt():
		if b.ranged && (v.Int() < b.lo || v.Int() > b.hi) {
			return tessera.Invalid(name, "%s must be %s", name, b.rangeText())
		}
	case v.CanFloat():
		if f := v.Float(); b.ranged && !(f >= float64(b.lo) && f <= float64(b.hi)) {
			return tessera.Invalid(name, "%s must be %s", name, b.rangeText())
		}
	case v.Kind() == reflect.Slice:
		if err := b.checkLen(name, v.Len(), "items"); err != nil {
			return err
		}
		if b.item == nil {
			return nil
		}
		for i := range v.Len() {
			if err := b.item.checkValue(name, v.Index(i)); err != nil {
				e := err.(*tessera.Error)
				e.Message = fmt.Sprintf("%s[%d]: %s", name, i, e.Message)
				return e
			}
		}
	}
	return nil
}

func (b *Bound) checkString(name, s string) error {
	if b.missing != "" {
		if !b.format.Match(s) {
			return tessera.NotFound(b.missing, Clip(s))
		}
		return nil
	}
	switch {
	case b.enum != nil:
		for _, e := range b.enum {
			if s == e {
				return nil
			}
		}
		return tessera.Invalid(name, "%s must be %s", name, orList(b.enum))
	case b.format != nil:
		if !b.format.Match(s) {
			return tessera.Invalid(name, "%s must match %s", name, b.format.Pattern)
		}
		return nil
	case b.line && strings.ContainsFunc(s, unicode.IsControl):
		return tessera.Invalid(name, "%s is one line of text, without control characters", name)
	}
	return b.checkLen(name, len(s), "bytes")
}

func (b *Bound) checkJSON(name string, raw []byte) error {
	n := len(raw)
	if b.compacted && b.maxLen > 0 && n > b.maxLen {
		var buf bytes.Buffer
		if json.Compact(&buf, raw) == nil {
			n = buf.Len()
		}
	}
	if b.maxLen > 0 && n > b.maxLen {
		what := "bytes"
		if b.compacted {
			what = "bytes (compacted JSON)"
		}
		return tessera.Invalid(name, "%s is at most %d %s", name, b.maxLen, what)
	}
	return nil
}

func (b *Bound) checkLen(name string, n int, unit string) error {
	switch {
	case b.tooLarge && n > b.maxLen:
		return &tessera.Error{Code: tessera.CodePayloadTooLarge, Field: name, Message: fmt.Sprintf("%s carries at most %d %s", name, b.maxLen, unit)}
	case b.minLen > 0 && n < b.minLen && b.maxLen > 0:
		return tessera.Invalid(name, "%s is required: %d–%d %s", name, b.minLen, b.maxLen, unit)
	case b.minLen > 0 && n < b.minLen:
		return tessera.Invalid(name, "%s holds at least %d %s", name, b.minLen, unit)
	case b.maxLen > 0 && n > b.maxLen:
		return tessera.Invalid(name, "%s is at most %d %s", name, b.maxLen, unit)
	}
	return nil
}

func (b *Bound) rangeText() string {
	switch {
	case b.lo == -b.hi:
		return fmt.Sprintf("within ±%d", b.hi)
	case b.hi == 1<<63-1:
		return fmt.Sprintf("at least %d", b.lo)
	}
	return fmt.Sprintf("%d–%d", b.lo, b.hi)
}

func orList(values []string) string {
	quoted := make([]string, len(values))
	for i, v := range values {
		quoted[i] = fmt.Sprintf("%q", v)
	}
	if len(quoted) == 1 {
		return quoted[0]
	}
	return "one of " + strings.Join(quoted[:len(quoted)-1], ", ") + " or " + quoted[len(quoted)-1]
}

// MaxEcho bounds what an error message repeats of a client's input.
const MaxEcho = 128

// Clip shortens s for an error message: at most MaxEcho bytes, then "…",
// never cutting a character in two.
func Clip(s string) string {
	if len(s) <= MaxEcho {
		return s
	}
	cut := MaxEcho
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
