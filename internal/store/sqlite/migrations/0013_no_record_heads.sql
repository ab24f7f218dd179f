-- Issue 28: a record's head is its newest version, one seek from the end
-- of its key's range of record_versions. The head row kept beside the
-- versions made every write two rows; versions are inserted first-wins,
-- so two writers of one next version still find out, as a moved head
-- told them.
DROP TABLE record_heads;
