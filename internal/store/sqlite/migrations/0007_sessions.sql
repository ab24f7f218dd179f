-- Anonymous demo sessions (SPEC §12). Everything here lives in the store,
-- so it holds across restarts and, with several nodes, across nodes.

-- The global allowance: one token bucket, refilled by elapsed time at each
-- take. tokens and updated_at start at 0, so the first take finds the
-- bucket full whatever its capacity (a flag, not known here).
CREATE TABLE session_bucket (
  id         INTEGER PRIMARY KEY,
  tokens     REAL NOT NULL,
  updated_at INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO session_bucket (id, tokens, updated_at) VALUES (1, 0, 0);

-- Sessions minted per grouped address (its salted hash), for the hourly
-- per-address limit. The key orders one address's mints by time, so the
-- window is one range; retention walks the addresses through the key, as
-- audit retention walks namespaces, so no second index is paid per mint.
CREATE TABLE session_mints (
  addr      TEXT NOT NULL,
  minted_at INTEGER NOT NULL,
  session   TEXT NOT NULL,
  PRIMARY KEY (addr, minted_at, session)
) WITHOUT ROWID;

-- Each session's durable request quota, and whether its demo namespace
-- and practice tasks were made (by its first call, not at mint).
CREATE TABLE session_quotas (
  principal_id TEXT PRIMARY KEY,
  used         INTEGER NOT NULL,
  quota        INTEGER NOT NULL,
  seeded       INTEGER NOT NULL
) WITHOUT ROWID;
