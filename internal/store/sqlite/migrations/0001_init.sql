-- The whole first schema. Every namespaced table leads with namespace in its
-- primary key, and tables are WITHOUT ROWID so the primary key is the table:
-- no hidden rowid index to keep, and fewer index entries per row written.

CREATE TABLE principals (
  id           TEXT PRIMARY KEY,
  kind         TEXT NOT NULL,
  account      TEXT NOT NULL,
  display_name TEXT NOT NULL,
  created_at   INTEGER NOT NULL,
  last_used_at INTEGER,
  purge_at     INTEGER
) WITHOUT ROWID;

CREATE TABLE keys (
  id           TEXT PRIMARY KEY,
  principal_id TEXT NOT NULL,
  secret_hash  BLOB NOT NULL,
  scopes       TEXT NOT NULL,
  expires_at   INTEGER,
  revoked_at   INTEGER,
  created_at   INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE namespaces (
  name       TEXT PRIMARY KEY,
  created_at INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE tasks (
  namespace        TEXT NOT NULL,
  id               TEXT NOT NULL,
  queue            TEXT NOT NULL,
  title            TEXT NOT NULL,
  brief            TEXT NOT NULL,
  payload          TEXT,
  labels           TEXT NOT NULL,
  priority         INTEGER NOT NULL,
  public           INTEGER NOT NULL,
  max_attempts     INTEGER NOT NULL,
  attempts         INTEGER NOT NULL,
  state            TEXT NOT NULL,
  run_at           INTEGER NOT NULL,
  created_by       TEXT NOT NULL,
  created_at       INTEGER NOT NULL,
  updated_at       INTEGER NOT NULL,
  cancel_requested INTEGER NOT NULL,
  result           TEXT,
  error            TEXT,
  progress         TEXT,
  lease_run_id     TEXT,
  lease_holder     TEXT,
  lease_token_hash BLOB,
  lease_expires_at INTEGER,
  lease_seconds    INTEGER,
  PRIMARY KEY (namespace, id)
) WITHOUT ROWID;

-- One index serves the claim (ready, by priority then run_at), the lapsed
-- lease check (leased, by queue) and counts by queue and state.
CREATE INDEX tasks_claim ON tasks (namespace, queue, state, priority DESC, run_at, id);

CREATE TABLE runs (
  namespace  TEXT NOT NULL,
  task_id    TEXT NOT NULL,
  run_id     TEXT NOT NULL,
  holder     TEXT NOT NULL,
  attempt    INTEGER NOT NULL,
  started_at INTEGER NOT NULL,
  ended_at   INTEGER,
  outcome    TEXT,
  error      TEXT,
  PRIMARY KEY (namespace, task_id, run_id)
) WITHOUT ROWID;

CREATE TABLE task_events (
  namespace  TEXT NOT NULL,
  task_id    TEXT NOT NULL,
  seq        INTEGER NOT NULL,
  kind       TEXT NOT NULL,
  body       TEXT NOT NULL,
  by         TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (namespace, task_id, seq)
) WITHOUT ROWID;

CREATE TABLE idempotency (
  namespace    TEXT NOT NULL,
  principal_id TEXT NOT NULL,
  route        TEXT NOT NULL,
  key          TEXT NOT NULL,
  request_hash BLOB NOT NULL,
  response     BLOB NOT NULL,
  created_at   INTEGER NOT NULL,
  PRIMARY KEY (namespace, principal_id, route, key)
) WITHOUT ROWID;
