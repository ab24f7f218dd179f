-- Issue 43: a task carries the W3C trace context its producer enqueued it
-- in, which every claim of it hands the worker. NULL for none (most
-- tasks: a NULL takes no room in the row); written once, at the enqueue,
-- and in no index.
ALTER TABLE tasks ADD COLUMN traceparent text;
ALTER TABLE tasks ADD COLUMN tracestate text;
