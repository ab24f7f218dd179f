-- Tasks that wait on others, and checkpoints a run leaves for the next
-- attempt. Both live beside the task row, paid for only by the tasks that
-- use them: a waiting task's state is 'waiting' on its row (never in the
-- claim's range), and the rest is here.

-- A task enqueued after others: its parents (a JSON array, in the order
-- given), those already counted as finished (settled: a parent is counted
-- once, whatever retries follow), how many have not finished, what it does
-- when one fails, and which parent failed or canceled it.
CREATE TABLE task_dependencies (
  namespace         TEXT NOT NULL,
  task_id           TEXT NOT NULL,
  parents           TEXT NOT NULL,
  settled           TEXT NOT NULL,
  waiting_on        INTEGER NOT NULL,
  on_parent_failure TEXT NOT NULL,
  failed_parent     TEXT,
  canceled_by       TEXT,
  PRIMARY KEY (namespace, task_id)
) WITHOUT ROWID;

-- One edge per parent and child, keyed by parent: a parent that finishes
-- finds its children with one seek, whatever else the namespace holds.
CREATE TABLE task_edges (
  namespace TEXT NOT NULL,
  parent_id TEXT NOT NULL,
  child_id  TEXT NOT NULL,
  PRIMARY KEY (namespace, parent_id, child_id)
) WITHOUT ROWID;

-- The last checkpoint a run of the task left.
CREATE TABLE task_checkpoints (
  namespace TEXT NOT NULL,
  task_id   TEXT NOT NULL,
  run_id    TEXT NOT NULL,
  attempt   INTEGER NOT NULL,
  at        INTEGER NOT NULL,
  value     TEXT NOT NULL,
  PRIMARY KEY (namespace, task_id)
) WITHOUT ROWID;

-- Parents whose children are still being settled, past the bounded share
-- the transaction that finished the parent did: the children up to cursor
-- are done.
CREATE TABLE dep_work (
  seq       INTEGER PRIMARY KEY,
  namespace TEXT NOT NULL,
  parent_id TEXT NOT NULL,
  kind      TEXT NOT NULL,
  cursor    TEXT NOT NULL,
  UNIQUE (namespace, parent_id, kind)
);
