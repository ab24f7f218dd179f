-- Issue 40: unique keys (below: debounce keys, parent results), as
-- SQLite's 0017. A task enqueued with a unique
-- key holds it, in task_unique, from its enqueue until it finishes; two
-- nodes enqueueing one key meet on its primary key, where the second
-- waits for the first's commit and then finds the key taken. Only keyed
-- tasks pay for it; tasks.unique_key (NULL for none) is in no index.
CREATE TABLE task_unique (
  namespace  TEXT COLLATE "C" NOT NULL,
  queue      TEXT COLLATE "C" NOT NULL,
  unique_key TEXT COLLATE "C" NOT NULL,
  task_id    TEXT COLLATE "C" NOT NULL,
  PRIMARY KEY (namespace, queue, unique_key)
);

ALTER TABLE tasks ADD COLUMN unique_key text;

-- Debounce keys, as SQLite's 0017: the task a key points at, moved on by
-- another enqueue of the key while it has not been claimed.
CREATE TABLE task_debounce (
  namespace    TEXT COLLATE "C" NOT NULL,
  queue        TEXT COLLATE "C" NOT NULL,
  debounce_key TEXT COLLATE "C" NOT NULL,
  task_id      TEXT COLLATE "C" NOT NULL,
  PRIMARY KEY (namespace, queue, debounce_key)
);

ALTER TABLE tasks ADD COLUMN debounce_key text;

-- Parent results, as SQLite's 0017.
ALTER TABLE tasks ADD COLUMN parent_results boolean NOT NULL DEFAULT false;
