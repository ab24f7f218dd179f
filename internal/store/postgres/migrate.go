package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strconv"
	"strings"

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

// readStatsSQL builds the statement that meters a transaction, from this
// schema's tables and their indexes as the catalog has them now (a
// migration run later by another node is seen at the next start).
//
// Rows written are, per table, (inserted + deleted + updated other than
// HOT) × (1 + the table's indexes) + HOT updates × 1: a row version written
// to the heap and, unless the update was HOT, an entry in every index —
// partial ones too, an upper bound as in SQLite. Rows read are the rows
// the transaction's scans visited: seq_tup_read of every table and
// idx_tup_read of every index (entries returned by index scans, index-only
// ones included; idx_tup_fetch would miss those). Both come from the
// counters pg_stat_xact_user_tables is made of, trigger-written rows
// included; a transaction's rows are the difference between a reading at
// its start and one just before its commit (DB.run says why).
func readStatsSQL(ctx context.Context, pool *pgxpool.Pool) (string, error) {
	rows, err := pool.Query(ctx, `SELECT c.oid::int8, array(SELECT i.indexrelid::int8 FROM pg_index i WHERE i.indrelid = c.oid ORDER BY 1)
 FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p') ORDER BY 1`)
	if err != nil {
		return "", err
	}
	var tables, every []string
	for rows.Next() {
		var rel int64
		var indexes []int64
		if err := rows.Scan(&rel, &indexes); err != nil {
			return "", err
		}
		tables = append(tables, fmt.Sprintf("(%d::oid, %d)", rel, len(indexes)))
		every = append(every, strconv.FormatInt(rel, 10))
		for _, ix := range indexes {
			every = append(every, strconv.FormatInt(ix, 10))
		}
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	if len(tables) == 0 {
		return "", errors.New("the schema has no tables")
	}
	return `SELECT coalesce(sum((pg_stat_get_xact_tuples_inserted(t.rel) + pg_stat_get_xact_tuples_deleted(t.rel)
    + pg_stat_get_xact_tuples_updated(t.rel) - pg_stat_get_xact_tuples_hot_updated(t.rel)) * (1 + t.indexes)
    + pg_stat_get_xact_tuples_hot_updated(t.rel)), 0)::int8,
  (SELECT coalesce(sum(pg_stat_get_xact_tuples_returned(r)), 0)::int8 FROM unnest('{` + strings.Join(every, ",") + `}'::oid[]) r)
 FROM (VALUES ` + strings.Join(tables, ", ") + `) t(rel, indexes)`, nil
}
