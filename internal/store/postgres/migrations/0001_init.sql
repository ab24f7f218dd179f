-- The whole first schema, the same tables and columns as SQLite's 0001.
-- Where the types differ: times are BIGINT Unix milliseconds, as in
-- SQLite (the precision the API speaks, and one value whichever backend
-- holds it); flags are BOOLEAN; opaque bytes are BYTEA; JSON stays TEXT,
-- byte for byte as written (jsonb would reorder keys and respace values).
-- Every text column that is compared or ordered is COLLATE "C": ids, keys
-- and names sort bytewise, as in SQLite, whatever the database's locale —
-- prefix ranges (RecordHeads) and cursors depend on it.
--
-- PostgreSQL tables are heaps: the primary key is an index of its own, so
-- a row written costs one more entry here than in SQLite's WITHOUT ROWID
-- tables, and the meter counts it (db.go).

CREATE TABLE principals (
  id           TEXT COLLATE "C" PRIMARY KEY,
  kind         TEXT NOT NULL,
  account      TEXT NOT NULL,
  display_name TEXT NOT NULL,
  created_at   BIGINT NOT NULL,
  last_used_at BIGINT,
  purge_at     BIGINT
);

CREATE TABLE keys (
  id           TEXT COLLATE "C" PRIMARY KEY,
  principal_id TEXT COLLATE "C" NOT NULL,
  secret_hash  BYTEA NOT NULL,
  scopes       TEXT NOT NULL,
  expires_at   BIGINT,
  revoked_at   BIGINT,
  created_at   BIGINT NOT NULL
);

CREATE TABLE namespaces (
  name       TEXT COLLATE "C" PRIMARY KEY,
  created_at BIGINT NOT NULL
);

CREATE TABLE tasks (
  namespace        TEXT COLLATE "C" NOT NULL,
  id               TEXT COLLATE "C" NOT NULL,
  queue            TEXT COLLATE "C" NOT NULL,
  title            TEXT NOT NULL,
  brief            TEXT NOT NULL,
  payload          TEXT,
  labels           TEXT NOT NULL,
  priority         INTEGER NOT NULL,
  public           BOOLEAN NOT NULL,
  max_attempts     INTEGER NOT NULL,
  attempts         INTEGER NOT NULL,
  state            TEXT COLLATE "C" NOT NULL,
  run_at           BIGINT NOT NULL,
  created_by       TEXT NOT NULL,
  created_at       BIGINT NOT NULL,
  updated_at       BIGINT NOT NULL,
  cancel_requested BOOLEAN NOT NULL,
  result           TEXT,
  error            TEXT,
  progress         TEXT,
  lease_run_id     TEXT,
  lease_holder     TEXT,
  lease_token_hash BYTEA,
  lease_expires_at BIGINT,
  lease_seconds    INTEGER,
  PRIMARY KEY (namespace, id)
);

-- As in SQLite's 0001; 0006 replaces it.
CREATE INDEX tasks_claim ON tasks (namespace, queue, state, priority DESC, run_at, id);

CREATE TABLE runs (
  namespace  TEXT COLLATE "C" NOT NULL,
  task_id    TEXT COLLATE "C" NOT NULL,
  run_id     TEXT COLLATE "C" NOT NULL,
  holder     TEXT NOT NULL,
  attempt    INTEGER NOT NULL,
  started_at BIGINT NOT NULL,
  ended_at   BIGINT,
  outcome    TEXT,
  error      TEXT,
  PRIMARY KEY (namespace, task_id, run_id)
);

CREATE TABLE task_events (
  namespace  TEXT COLLATE "C" NOT NULL,
  task_id    TEXT COLLATE "C" NOT NULL,
  seq        BIGINT NOT NULL,
  kind       TEXT NOT NULL,
  body       TEXT NOT NULL,
  by         TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  PRIMARY KEY (namespace, task_id, seq)
);

CREATE TABLE idempotency (
  namespace    TEXT COLLATE "C" NOT NULL,
  principal_id TEXT COLLATE "C" NOT NULL,
  route        TEXT COLLATE "C" NOT NULL,
  key          TEXT COLLATE "C" NOT NULL,
  request_hash BYTEA NOT NULL,
  response     BYTEA NOT NULL,
  created_at   BIGINT NOT NULL,
  PRIMARY KEY (namespace, principal_id, route, key)
);
