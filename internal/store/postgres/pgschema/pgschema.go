// Package pgschema makes fresh PostgreSQL schemas: a store opened on the URL
// it returns lives in a schema of its own, which tests and `tessera bench
// rows --store` measure on and drop afterwards.
package pgschema

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"

	"github.com/jackc/pgx/v5"
)

// New creates an empty schema with a random name (prefix + hex) in
// the database at base and returns base's URL with search_path set to it,
// and a function that drops the schema with everything in it.
func New(ctx context.Context, base, prefix string) (string, func(context.Context) error, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", nil, fmt.Errorf("postgres: %q is not a URL: %w", base, err)
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	name := prefix + hex.EncodeToString(b)
	if err := execOnce(ctx, base, `CREATE SCHEMA `+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", nil, err
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	drop := func(ctx context.Context) error {
		return execOnce(ctx, base, `DROP SCHEMA `+pgx.Identifier{name}.Sanitize()+` CASCADE`)
	}
	return u.String(), drop, nil
}

// execOnce runs one statement on a connection of its own.
func execOnce(ctx context.Context, url, sql string) error {
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("postgres: connect: %w", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, sql); err != nil {
		return fmt.Errorf("postgres: %s: %w", sql, err)
	}
	return nil
}
