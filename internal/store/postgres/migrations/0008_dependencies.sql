-- Tasks that wait on others, and checkpoints a run leaves for the next
-- attempt. Both live beside the task row, paid for only by the tasks that
-- use them: a waiting task's state is 'waiting' on its row (never in the
-- claim's range), and the rest is here.

-- A task enqueued after others: its parents (a JSON array, in the order
-- given), those already counted as finished (settled: a parent is counted
-- once, whatever retries follow), how many have not finished, what it does
-- when one fails, and which parent failed or canceled it.
CREATE TABLE task_dependencies (
  namespace         TEXT COLLATE "C" NOT NULL,
  task_id           TEXT COLLATE "C" NOT NULL,
  parents           TEXT COLLATE "C" NOT NULL,
  settled           TEXT COLLATE "C" NOT NULL,
  waiting_on        INTEGER NOT NULL,
  on_parent_failure TEXT COLLATE "C" NOT NULL,
  failed_parent TEXT COLLATE "C",
  canceled_by TEXT COLLATE "C",
  PRIMARY KEY (namespace, task_id)
);

-- One edge per parent and child, keyed by parent: a parent that finishes
-- finds its children with one seek, whatever else the namespace holds.
CREATE TABLE task_edges (
  namespace TEXT COLLATE "C" NOT NULL,
  parent_id TEXT COLLATE "C" NOT NULL,
  child_id  TEXT COLLATE "C" NOT NULL,
  PRIMARY KEY (namespace, parent_id, child_id)
);

-- The last checkpoint a run of the task left.
CREATE TABLE task_checkpoints (
  namespace TEXT COLLATE "C" NOT NULL,
  task_id   TEXT COLLATE "C" NOT NULL,
  run_id    TEXT COLLATE "C" NOT NULL,
  attempt   INTEGER NOT NULL,
  at        BIGINT NOT NULL,
  value     TEXT COLLATE "C" NOT NULL,
  PRIMARY KEY (namespace, task_id)
);

-- Parents whose children are still being settled, past the bounded share
-- the transaction that finished the parent did: the children up to cursor
-- are done.
CREATE TABLE dep_work (
  seq       BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  namespace TEXT COLLATE "C" NOT NULL,
  parent_id TEXT COLLATE "C" NOT NULL,
  kind      TEXT COLLATE "C" NOT NULL,
  cursor    TEXT COLLATE "C" NOT NULL,
  UNIQUE (namespace, parent_id, kind)
);
