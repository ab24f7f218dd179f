package auth_test

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/tessera-dev/tessera/internal/auth"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// keyRE is the key format of SPEC §1 and the README, written independently
// of ParseKey so the two can be checked against each other.
var keyRE = regexp.MustCompile(`^tsk_([a-z0-9]{4,32})_([A-Za-z0-9]{24,64})$`)

const secret24 = "abcdefghijklmnopqrstuvwx"

func TestParseKey(t *testing.T) {
	valid := []struct{ key, id, secret string }{
		{"tsk_abcd_" + secret24, "abcd", secret24},
		{"tsk_demo_abcdefghijklmnopqrstuvwxyz0123", "demo", "abcdefghijklmnopqrstuvwxyz0123"},
		{"tsk_0000_ABCDEFGHIJKLMNOPQRSTUVWX", "0000", "ABCDEFGHIJKLMNOPQRSTUVWX"},
		{"tsk_" + strings.Repeat("z", 32) + "_" + strings.Repeat("Z9", 32), strings.Repeat("z", 32), strings.Repeat("Z9", 32)},
	}
	for _, tc := range valid {
		id, secret, err := auth.ParseKey(tc.key)
		if err != nil || id != tc.id || secret != tc.secret {
			t.Errorf("ParseKey(%q) = %q, %q, %v; want %q, %q, nil", tc.key, id, secret, err, tc.id, tc.secret)
		}
	}

	invalid := map[string]string{
		"empty":                     "",
		"prefix only":               "tsk_",
		"no prefix":                 "abcd_" + secret24,
		"upper-case prefix":         "TSK_abcd_" + secret24,
		"other prefix":              "tsx_abcd_" + secret24,
		"no secret separator":       "tsk_abcd" + secret24,
		"empty id":                  "tsk__" + secret24,
		"empty secret":              "tsk_abcd_",
		"id of 3":                   "tsk_abc_" + secret24,
		"id of 33":                  "tsk_" + strings.Repeat("a", 33) + "_" + secret24,
		"upper-case id":             "tsk_ABCD_" + secret24,
		"dash in id":                "tsk_ab-cd_" + secret24,
		"secret of 23":              "tsk_abcd_" + secret24[:23],
		"secret of 65":              "tsk_abcd_" + strings.Repeat("a", 65),
		"underscore in secret":      "tsk_abcd_abcdefghijkl_mnopqrstuvwxyz",
		"dash in secret":            "tsk_abcd_abcdefghijkl-mnopqrstuvwxyz",
		"non-ASCII in id":           "tsk_abcé_" + secret24,
		"non-ASCII in secret":       "tsk_abcd_" + secret24 + "é",
		"leading space":             " tsk_abcd_" + secret24,
		"trailing newline":          "tsk_abcd_" + secret24 + "\n",
		"NUL in secret":             "tsk_abcd_" + secret24 + "\x00",
		"bearer prefix kept":        "Bearer tsk_abcd_" + secret24,
		"two keys":                  "tsk_abcd_" + secret24 + ",tsk_abcd_" + secret24,
		"over the length bound":     "tsk_" + strings.Repeat("a", 32) + "_" + strings.Repeat("b", 65),
		"invalid UTF-8":             "tsk_abcd_" + secret24[:23] + "\xff",
		"fullwidth digit in secret": "tsk_abcd_" + secret24[:23] + "１",
	}
	for name, key := range invalid {
		if id, secret, err := auth.ParseKey(key); err == nil {
			t.Errorf("%s: ParseKey(%q) accepted it as %q, %q", name, key, id, secret)
		} else if id != "" || secret != "" {
			t.Errorf("%s: ParseKey(%q) failed but returned parts %q, %q", name, key, id, secret)
		}
	}
}

// FuzzParseKey checks ParseKey against the format's regular expression: it
// never panics, accepts exactly the keys the format allows, and an accepted
// key's parts put back together are the input.
func FuzzParseKey(f *testing.F) {
	for _, seed := range []string{
		"",
		"tsk_",
		"tsk_abcd_" + secret24,
		"tsk_demo_abcdefghijklmnopqrstuvwxyz0123",
		"tsk_" + strings.Repeat("z", 32) + "_" + strings.Repeat("Z", 64),
		"tsk_" + strings.Repeat("z", 33) + "_" + strings.Repeat("Z", 64),
		"tsk_abcd_" + strings.Repeat("Z", 65),
		"tsk_abc_" + secret24,
		"tsk_abcd_abcdefghijkl_mnopqrstuvwxyz",
		"tsk_abcd__" + secret24,
		"tsk__abcd_" + secret24,
		"tsk_ABCD_" + secret24,
		"tsk_abcé_" + secret24,
		"tsk_abcd_" + secret24 + "\n",
		"tsk_abcd_" + secret24 + "\x00",
		"Bearer tsk_abcd_" + secret24,
		"\xff\xfe",
		strings.Repeat("tsk_", 50),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, key string) {
		id, secret, err := auth.ParseKey(key)
		m := keyRE.FindStringSubmatch(key)
		if err != nil {
			if m != nil {
				t.Fatalf("ParseKey(%q) rejected a well-formed key: %v", key, err)
			}
			if id != "" || secret != "" {
				t.Fatalf("ParseKey(%q) failed but returned parts %q, %q", key, id, secret)
			}
			return
		}
		if m == nil {
			t.Fatalf("ParseKey(%q) accepted a malformed key as %q, %q", key, id, secret)
		}
		if "tsk_"+id+"_"+secret != key {
			t.Fatalf("ParseKey(%q) = %q, %q, which do not rebuild the key", key, id, secret)
		}
		if id != m[1] || secret != m[2] {
			t.Fatalf("ParseKey(%q) = %q, %q, want %q, %q", key, id, secret, m[1], m[2])
		}
		if len(key) > auth.MaxKeyLen {
			t.Fatalf("accepted key of %d bytes is over MaxKeyLen %d", len(key), auth.MaxKeyLen)
		}
	})
}

// FuzzBearer reads the Authorization and X-Api-Key headers of SPEC §4:
// nothing panics it, every refusal is unauthorized and says what to send,
// and what it accepts is the text after a case-insensitive "Bearer ".
func FuzzBearer(f *testing.F) {
	for _, s := range []string{"", "Bearer tsk_abcd_" + secret24, "bearer x", "Basic dXNlcjpwYXNz", "tsk_abcd_" + secret24, "Bearer", "BEARER  two  spaces", "Bearer \x00"} {
		f.Add(s, "")
		f.Add(s, "tsk_abcd_"+secret24)
	}
	f.Fuzz(func(t *testing.T, authorization, apiKey string) {
		token, err := auth.Bearer(authorization, apiKey)
		if err != nil {
			var e *tessera.Error
			if !errors.As(err, &e) || e.Code != tessera.CodeUnauthorized || !strings.Contains(e.Message, "Bearer") && !strings.Contains(e.Message, "tsk_") {
				t.Fatalf("Bearer(%q, %q) = %v", authorization, apiKey, err)
			}
			return
		}
		scheme, rest, _ := strings.Cut(authorization, " ")
		if !strings.EqualFold(scheme, "Bearer") || token != strings.TrimSpace(rest) {
			t.Fatalf("Bearer(%q) accepted %q", authorization, token)
		}
	})
}
