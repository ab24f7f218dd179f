-- Issue 43: a task carries the W3C trace context its producer enqueued it
-- in, which every claim of it hands the worker. Empty for none; written
-- once, at the enqueue, and in no index.
ALTER TABLE tasks ADD COLUMN traceparent TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN tracestate TEXT NOT NULL DEFAULT '';
