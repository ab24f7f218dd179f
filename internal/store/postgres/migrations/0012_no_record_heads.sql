-- Issue 28: SQLite's 0011. A record's head is its newest version; the
-- head row beside the versions goes.
DROP TABLE record_heads;
