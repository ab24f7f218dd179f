-- Issue 39: gates. A task parked on gates is 'gated' on its row (never in
-- the claim's range), counted in a column of its own (counts.go); its
-- gates live beside it, paid for only by the tasks that have them.
-- tasks.gates counts the gates a task has had, so a claim reads their
-- answers only for a task that had one.
CREATE TABLE task_gates (
  namespace   TEXT COLLATE "C" NOT NULL,
  task_id     TEXT COLLATE "C" NOT NULL,
  key         TEXT COLLATE "C" NOT NULL,
  kind        TEXT NOT NULL,
  message     TEXT NOT NULL,
  schema      TEXT,
  url         TEXT,
  timeout_at  BIGINT,
  -- due_at is timeout_at while the gate is open: what the timers seek.
  due_at      BIGINT,
  on_timeout  TEXT NOT NULL,
  opened_at   BIGINT NOT NULL,
  run_id      TEXT,
  action      TEXT,
  content     TEXT,
  answered_by TEXT,
  answered_at BIGINT,
  PRIMARY KEY (namespace, task_id, key)
);
-- Open gates by when they time out: what each node's timer seeks; a gate
-- without a timeout, or answered, has no entry.
CREATE INDEX task_gates_due ON task_gates (due_at) WHERE due_at IS NOT NULL;

ALTER TABLE tasks ADD COLUMN gates INTEGER NOT NULL DEFAULT 0;
ALTER TABLE task_counts ADD COLUMN gated BIGINT NOT NULL DEFAULT 0;
