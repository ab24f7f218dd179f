-- Idempotency entries in the order they were made. Keyed by the client's
-- key, each entry (its whole first response inline) landed on a random
-- leaf of the table's tree: several pages of the WAL per entry, page splits
-- at most inserts, and a second tree by age for retention. Now the row id
-- is the entry's making time in milliseconds × 4096 (raised past the last
-- id when the clock has not moved), so entries append to one edge and
-- retention deletes an id range; the unique index holds only the key.
CREATE TABLE idempotency_by_age (
  id           INTEGER PRIMARY KEY,
  namespace    TEXT NOT NULL,
  principal_id TEXT NOT NULL,
  route        TEXT NOT NULL,
  key          TEXT NOT NULL,
  request_hash BLOB NOT NULL,
  response     BLOB NOT NULL,
  created_at   INTEGER NOT NULL
);
-- The n-th entry by age gets max(its time × 4096, the last id + 1), the
-- rule every insert follows, in closed form.
INSERT INTO idempotency_by_age (id, namespace, principal_id, route, key, request_hash, response, created_at)
  SELECT n + max(created_at * 4096 - n) OVER (ORDER BY n ROWS UNBOUNDED PRECEDING),
         namespace, principal_id, route, key, request_hash, response, created_at
  FROM (SELECT *, row_number() OVER (ORDER BY created_at, namespace, principal_id, route, key) AS n FROM idempotency);
DROP TABLE idempotency;
ALTER TABLE idempotency_by_age RENAME TO idempotency;
CREATE UNIQUE INDEX idempotency_key ON idempotency (namespace, principal_id, route, key);
