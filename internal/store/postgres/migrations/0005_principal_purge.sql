-- Retention of anonymous principals: SQLite's 0005.
CREATE INDEX principals_purge ON principals (purge_at) WHERE purge_at IS NOT NULL;
CREATE INDEX keys_principal ON keys (principal_id);
