package core

import (
	"encoding/base64"
	"errors"

	"github.com/tessera-dev/tessera/internal/tessera"
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

// pageParams checks a listing's limit (0: the default) and decodes its
// cursor: the one place every listing's page parameters are read.
func pageParams(cursor string, limit int) (string, int, error) {
	if limit == 0 {
		limit = DefaultListSize
	}
	if cursor == "" {
		return "", limit, nil
	}
	pos, err := decodeCursor(cursor)
	if err != nil {
		return "", 0, tessera.Invalid("cursor", "cursor is not one this server issued")
	}
	return pos, limit, nil
}
