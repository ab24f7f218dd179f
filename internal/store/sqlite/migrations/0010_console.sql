-- The live event stream and the operator console (issue 29).
--
-- The stream is the audit trail read forward: every successful action
-- already writes its event in the transaction that acts, so the stream
-- costs no row per state change. What an event lacked for it is carried in
-- columns of its row: the task it is about (or was done under: a record
-- written under a lease), that task's queue, and the state the action left
-- the task in. Columns, no index: an audit row writes as many index
-- entries as before.
ALTER TABLE audit_events ADD COLUMN task_id TEXT;
ALTER TABLE audit_events ADD COLUMN queue TEXT;
ALTER TABLE audit_events ADD COLUMN state TEXT;

-- A row while its queue is paused: claims on it find nothing. Claims read
-- it through the core's memory of each namespace's paused queues, so the
-- hot path pays no statement for it.
CREATE TABLE queue_pauses (
  namespace TEXT NOT NULL,
  queue     TEXT NOT NULL,
  paused_by TEXT NOT NULL,
  paused_at INTEGER NOT NULL,
  PRIMARY KEY (namespace, queue)
) WITHOUT ROWID;
