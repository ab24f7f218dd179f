-- The audit trail, its counters, daily address salts and the namespace
-- identity snapshot. Audit ids are ULIDs, so (namespace, id) orders events
-- by time and serves reads and the retention delete alike. Neither table
-- has a secondary index: every audited action writes one entry, and reads
-- by principal (GET /v1/me/audit) walk each namespace's primary key over
-- the 24 h window instead — a rarer read pays so the common write is cheap.

CREATE TABLE audit_events (
  namespace    TEXT NOT NULL,
  id           TEXT NOT NULL,
  time         INTEGER NOT NULL,
  principal_id TEXT NOT NULL,
  key_id       TEXT NOT NULL,
  action       TEXT NOT NULL,
  target       TEXT NOT NULL,
  run_id       TEXT,
  status       INTEGER NOT NULL,
  ip_hash      TEXT NOT NULL,
  public       INTEGER NOT NULL,
  PRIMARY KEY (namespace, id)
) WITHOUT ROWID;

CREATE TABLE audit_counters (
  namespace    TEXT NOT NULL,
  minute       INTEGER NOT NULL,
  principal_id TEXT NOT NULL,
  action       TEXT NOT NULL,
  outcome      TEXT NOT NULL,
  count        INTEGER NOT NULL,
  PRIMARY KEY (namespace, minute, principal_id, action, outcome)
) WITHOUT ROWID;

CREATE TABLE ip_salts (
  day  TEXT PRIMARY KEY,
  salt BLOB NOT NULL
) WITHOUT ROWID;

CREATE TABLE namespace_identities (
  namespace    TEXT NOT NULL,
  principal_id TEXT NOT NULL,
  account      TEXT NOT NULL,
  kind         TEXT NOT NULL,
  display_name TEXT NOT NULL,
  seen_at      INTEGER NOT NULL,
  PRIMARY KEY (namespace, principal_id)
) WITHOUT ROWID;

-- Retention of idempotency entries by age.
CREATE INDEX idempotency_created ON idempotency (created_at);
