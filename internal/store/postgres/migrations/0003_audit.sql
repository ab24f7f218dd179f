-- The audit trail, its counters, daily address salts and the namespace
-- identity snapshot: SQLite's 0003.

CREATE TABLE audit_events (
  namespace    TEXT COLLATE "C" NOT NULL,
  id           TEXT COLLATE "C" NOT NULL,
  time         BIGINT NOT NULL,
  principal_id TEXT COLLATE "C" NOT NULL,
  key_id       TEXT NOT NULL,
  action       TEXT COLLATE "C" NOT NULL,
  target       TEXT NOT NULL,
  run_id       TEXT,
  status       INTEGER NOT NULL,
  ip_hash      TEXT NOT NULL,
  public       BOOLEAN NOT NULL,
  PRIMARY KEY (namespace, id)
);

CREATE TABLE audit_counters (
  namespace    TEXT COLLATE "C" NOT NULL,
  minute       BIGINT NOT NULL,
  principal_id TEXT COLLATE "C" NOT NULL,
  action       TEXT COLLATE "C" NOT NULL,
  outcome      TEXT COLLATE "C" NOT NULL,
  count        BIGINT NOT NULL,
  PRIMARY KEY (namespace, minute, principal_id, action, outcome)
);

CREATE TABLE ip_salts (
  day  TEXT COLLATE "C" PRIMARY KEY,
  salt BYTEA NOT NULL
);

CREATE TABLE namespace_identities (
  namespace    TEXT COLLATE "C" NOT NULL,
  principal_id TEXT COLLATE "C" NOT NULL,
  account      TEXT NOT NULL,
  kind         TEXT NOT NULL,
  display_name TEXT NOT NULL,
  seen_at      BIGINT NOT NULL,
  PRIMARY KEY (namespace, principal_id)
);

CREATE INDEX idempotency_created ON idempotency (created_at);
