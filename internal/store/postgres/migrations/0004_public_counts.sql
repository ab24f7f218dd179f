-- Public state (SPEC §3.2, §10): SQLite's 0004, the same tables kept by
-- the same rules, with the triggers in PL/pgSQL. 0006 replaces the task
-- tables and triggers of this file; public_tasks and public_events stay.
--
-- Every trigger function is created with SET search_path FROM CURRENT: it
-- writes the tables of the schema it was created in, whatever search_path
-- the session that fires it runs with.

CREATE TABLE public_counts (
  namespace TEXT COLLATE "C" NOT NULL,
  queue     TEXT COLLATE "C" NOT NULL,
  state     TEXT COLLATE "C" NOT NULL,
  count     BIGINT NOT NULL,
  PRIMARY KEY (namespace, queue, state)
);

CREATE TABLE public_tasks (
  namespace TEXT COLLATE "C" NOT NULL,
  id        TEXT COLLATE "C" NOT NULL,
  PRIMARY KEY (namespace, id)
);

CREATE TABLE public_ready (
  namespace TEXT COLLATE "C" NOT NULL,
  queue     TEXT COLLATE "C" NOT NULL,
  run_at    BIGINT NOT NULL,
  id        TEXT COLLATE "C" NOT NULL,
  PRIMARY KEY (namespace, queue, run_at, id)
);

INSERT INTO public_counts (namespace, queue, state, count)
  SELECT namespace, queue, state, count(*) FROM tasks WHERE public GROUP BY namespace, queue, state;
INSERT INTO public_tasks (namespace, id) SELECT namespace, id FROM tasks WHERE public;
INSERT INTO public_ready (namespace, queue, run_at, id)
  SELECT namespace, queue, run_at, id FROM tasks WHERE public AND state = 'ready';

CREATE FUNCTION public_tasks_change() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.public THEN
    IF TG_OP = 'DELETE' OR (OLD.state, OLD.queue, OLD.public) IS DISTINCT FROM (NEW.state, NEW.queue, NEW.public) THEN
      UPDATE public_counts SET count = count - 1 WHERE namespace = OLD.namespace AND queue = OLD.queue AND state = OLD.state;
    END IF;
    IF TG_OP = 'DELETE' OR NOT NEW.public THEN
      DELETE FROM public_tasks WHERE namespace = OLD.namespace AND id = OLD.id;
    END IF;
    IF OLD.state = 'ready' THEN
      DELETE FROM public_ready WHERE namespace = OLD.namespace AND queue = OLD.queue AND run_at = OLD.run_at AND id = OLD.id;
    END IF;
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.public THEN
    IF TG_OP = 'INSERT' OR (OLD.state, OLD.queue, OLD.public) IS DISTINCT FROM (NEW.state, NEW.queue, NEW.public) THEN
      INSERT INTO public_counts (namespace, queue, state, count) VALUES (NEW.namespace, NEW.queue, NEW.state, 1)
        ON CONFLICT (namespace, queue, state) DO UPDATE SET count = public_counts.count + 1;
    END IF;
    IF TG_OP = 'INSERT' OR NOT OLD.public THEN
      INSERT INTO public_tasks (namespace, id) VALUES (NEW.namespace, NEW.id);
    END IF;
    IF NEW.state = 'ready' THEN
      INSERT INTO public_ready (namespace, queue, run_at, id) VALUES (NEW.namespace, NEW.queue, NEW.run_at, NEW.id);
    END IF;
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER public_tasks_after_insert AFTER INSERT ON tasks
  FOR EACH ROW WHEN (NEW.public) EXECUTE FUNCTION public_tasks_change();
CREATE TRIGGER public_tasks_after_update AFTER UPDATE OF state, queue, public, run_at ON tasks
  FOR EACH ROW WHEN ((OLD.public OR NEW.public)
    AND (OLD.state, OLD.queue, OLD.public, OLD.run_at) IS DISTINCT FROM (NEW.state, NEW.queue, NEW.public, NEW.run_at))
  EXECUTE FUNCTION public_tasks_change();
CREATE TRIGGER public_tasks_after_delete AFTER DELETE ON tasks
  FOR EACH ROW WHEN (OLD.public) EXECUTE FUNCTION public_tasks_change();

CREATE TABLE public_events (
  namespace TEXT COLLATE "C" NOT NULL,
  id        TEXT COLLATE "C" NOT NULL,
  PRIMARY KEY (namespace, id)
);

INSERT INTO public_events (namespace, id) SELECT namespace, id FROM audit_events WHERE public;

CREATE FUNCTION public_events_change() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO public_events (namespace, id) VALUES (NEW.namespace, NEW.id);
  ELSE
    DELETE FROM public_events WHERE namespace = OLD.namespace AND id = OLD.id;
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER public_events_after_insert AFTER INSERT ON audit_events
  FOR EACH ROW WHEN (NEW.public) EXECUTE FUNCTION public_events_change();
CREATE TRIGGER public_events_after_delete AFTER DELETE ON audit_events
  FOR EACH ROW WHEN (OLD.public) EXECUTE FUNCTION public_events_change();
