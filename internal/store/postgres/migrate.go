package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tessera-dev/tessera/internal/store/sqlschema"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// The schema's version is the one row of tessera_meta: what SQLite keeps
// in PRAGMA user_version. It is made by the migrator, not by a numbered
// migration, so the numbered files hold the same tables as SQLite's.
const metaTable = `CREATE TABLE IF NOT EXISTS tessera_meta (
  id             BOOLEAN PRIMARY KEY DEFAULT true CHECK (id),
  schema_version INTEGER NOT NULL
)`

// migrate applies the migrations the schema lacks. The version is read
// first in a READ ONLY transaction, so an up-to-date schema is opened with
// no write at all. Otherwise one transaction takes the schema's migration
// lock (several nodes may start at once: the others wait, then find the
// work done), reads the version again and applies every missing file and
// the new version together: a crash leaves the old schema or the new,
// never half of it.
func (db *DB) migrate(ctx context.Context) error {
	files, err := sqlschema.Migrations(migrationFS)
	if err != nil {
		return err
	}
	version, err := readVersion(ctx, db.pool)
	if err != nil {
		return err
	}
	if version > 0 {
		db.meter.Add(ctx, 0, 1) // the meta row
	}
	if version == 0 && db.existing {
		return fmt.Errorf("postgres: schema %s holds no Tessera store: start `tessera serve --store …` on it once to make one", db.schema)
	}
	if version >= len(files) {
		return nil
	}
	if err := db.meter.WriteRefusal(); err != nil {
		return err
	}
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return translate(fmt.Errorf("postgres: migrate: %w", err), false, db.meter)
	}
	defer conn.Release()
	err = pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{AccessMode: pgx.ReadWrite}, func(tx pgx.Tx) error {
		// The lock is per schema: nodes of other deployments (or parallel
		// tests, a schema each) on the same server do not wait for it.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('tessera migrate ' || current_schema()))`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, metaTable); err != nil {
			return err
		}
		var version int
		err := tx.QueryRow(ctx, `SELECT schema_version FROM tessera_meta`).Scan(&version)
		if errors.Is(err, pgx.ErrNoRows) {
			_, err = tx.Exec(ctx, `INSERT INTO tessera_meta (schema_version) VALUES (0)`)
		}
		if err != nil {
			return err
		}
		pending, _ := sqlschema.Pending(files, min(version, len(files)))
		for i, name := range pending {
			sql, err := migrationFS.ReadFile(name)
			if err != nil {
				return err
			}
			// The simple protocol: a file holds many statements.
			if _, err := tx.Conn().PgConn().Exec(ctx, string(sql)).ReadAll(); err != nil {
				return fmt.Errorf("migration %s: %w", name, err)
			}
			if _, err := tx.Exec(ctx, `UPDATE tessera_meta SET schema_version = $1`, version+i+1); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return translate(fmt.Errorf("postgres: migrate schema %s: %w", db.schema, err), false, db.meter)
	}
	return nil
}

// readVersion returns the schema's version, 0 when it has none yet, in a
// READ ONLY transaction.
func readVersion(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	version := 0
	err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass('tessera_meta') IS NOT NULL`).Scan(&exists); err != nil || !exists {
			return err
		}
		err := tx.QueryRow(ctx, `SELECT schema_version FROM tessera_meta`).Scan(&version)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("postgres: read the schema version: %w", err)
	}
	return version, nil
}
