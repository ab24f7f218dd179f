-- Issue 40: unique keys, debounce keys and parent results. A task
-- enqueued with a unique key holds it, in
-- task_unique, from its enqueue until it finishes: a second enqueue of the
-- key in the queue meanwhile finds it there and answers that task. Only
-- keyed tasks pay for it (a row here, written at the enqueue and deleted
-- at the finish); tasks.unique_key says which key a task had, in no index.
CREATE TABLE task_unique (
  namespace  TEXT NOT NULL,
  queue      TEXT NOT NULL,
  unique_key TEXT NOT NULL,
  task_id    TEXT NOT NULL,
  PRIMARY KEY (namespace, queue, unique_key)
) WITHOUT ROWID;

ALTER TABLE tasks ADD COLUMN unique_key TEXT NOT NULL DEFAULT '';

-- Debounce keys: a task enqueued with one holds it in task_debounce until
-- it finishes; while it has not been claimed, another enqueue of the key
-- moves it on (its title, brief, payload and run_at) instead of making a
-- task. Once it has been claimed the next enqueue points the key at a new
-- task. tasks.debounce_key says which key a task had, in no index.
CREATE TABLE task_debounce (
  namespace    TEXT NOT NULL,
  queue        TEXT NOT NULL,
  debounce_key TEXT NOT NULL,
  task_id      TEXT NOT NULL,
  PRIMARY KEY (namespace, queue, debounce_key)
) WITHOUT ROWID;

ALTER TABLE tasks ADD COLUMN debounce_key TEXT NOT NULL DEFAULT '';

-- Parent results: a task enqueued after others with parent_results has
-- its parents' outcomes and results handed to each claim of it.
ALTER TABLE tasks ADD COLUMN parent_results INTEGER NOT NULL DEFAULT 0;
