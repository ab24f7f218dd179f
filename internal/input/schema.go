package input

import "fmt"

// Keywords are the JSON Schema keywords of b: what the API description and
// the MCP tool schemas tell a client of the field, so that a client that
// validates before sending is refused nothing the schema allowed. Lengths
// count bytes on the server and characters in JSON Schema, so a maxLength
// is the byte bound: never looser than the server, exact for ASCII.
func (b Bound) Keywords() map[string]any {
	kw := map[string]any{}
	if b.ranged {
		kw["minimum"] = b.lo
		if b.hi != 1<<63-1 {
			kw["maximum"] = b.hi
		}
	}
	switch {
	case b.isJSON:
	case b.item != nil:
		if b.minLen > 0 {
			kw["minItems"] = b.minLen
		}
		if b.maxLen > 0 {
			kw["maxItems"] = b.maxLen
		}
		kw["items"] = b.item.Keywords()
	case b.enum != nil:
		kw["enum"] = b.enum
	case b.format != nil:
		kw["pattern"] = b.format.Pattern
		kw["maxLength"] = b.maxLen
	default:
		if b.line {
			kw["pattern"] = oneLine
		}
		if b.minLen > 0 {
			kw["minLength"] = b.minLen
		}
		if b.maxLen > 0 {
			kw["maxLength"] = b.maxLen
		}
	}
	if b.def != nil {
		kw["default"] = b.def
	}
	return kw
}

// JSONDoc describes a JSON value's bound in words: JSON Schema has no
// keyword for a value's encoded size.
func (b Bound) JSONDoc() string {
	if b.maxLen == 0 {
		return "any JSON value"
	}
	if b.compacted {
		return fmt.Sprintf("any JSON value, at most %d bytes compacted", b.maxLen)
	}
	return fmt.Sprintf("any JSON value, at most %d bytes", b.maxLen)
}

// Max is b's upper bound: the range's top, or the length's; 0 if none.
// The discovery documents quote limits from it.
func (b Bound) Max() int64 {
	if b.ranged {
		return b.hi
	}
	return int64(b.maxLen)
}

// Min is b's lower bound: the range's bottom, or the length's.
func (b Bound) Min() int64 {
	if b.ranged {
		return b.lo
	}
	return int64(b.minLen)
}

// DefaultValue is the value an absent field takes (nil: none).
func (b Bound) DefaultValue() any { return b.def }
