package core

import (
	"encoding/base64"
	"errors"
)

// Cursors are opaque to clients: the position they hold (an id or a
// sequence) is base64url-wrapped so nobody builds one by hand.

func encodeCursor(pos string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(pos))
}

func decodeCursor(c string) (string, error) {
	if len(c) > 128 {
		return "", errors.New("cursor too long")
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) == 0 {
		return "", errors.New("malformed cursor")
	}
	return string(b), nil
}
