-- Anonymous demo sessions (SPEC §12): SQLite's 0007, the same tables. The
-- bucket's level is DOUBLE PRECISION, as SQLite's REAL.

CREATE TABLE session_bucket (
  id         INTEGER PRIMARY KEY,
  tokens     DOUBLE PRECISION NOT NULL,
  updated_at BIGINT NOT NULL
);
INSERT INTO session_bucket (id, tokens, updated_at) VALUES (1, 0, 0);

CREATE TABLE session_mints (
  addr      TEXT COLLATE "C" NOT NULL,
  minted_at BIGINT NOT NULL,
  session   TEXT COLLATE "C" NOT NULL,
  PRIMARY KEY (addr, minted_at, session)
);

CREATE TABLE session_quotas (
  principal_id TEXT COLLATE "C" PRIMARY KEY,
  used         INTEGER NOT NULL,
  quota        INTEGER NOT NULL,
  seeded       BOOLEAN NOT NULL
);
