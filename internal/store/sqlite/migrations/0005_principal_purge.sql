-- Retention of anonymous principals (SPEC §9, §12): a partial index holds
-- only principals with a purge time, so keyed principals cost nothing in
-- it; their keys are found through keys_principal. (The meter still counts
-- an entry per principals row written: it cannot see a partial index's
-- predicate, and reports an upper bound.)
CREATE INDEX principals_purge ON principals (purge_at) WHERE purge_at IS NOT NULL;
CREATE INDEX keys_principal ON keys (principal_id);
