package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

func testConsole(t *testing.T, open Opener) {
	// streamEvent is an audit event at epoch + ms milliseconds, with a
	// deterministic id of that time.
	streamEvent := func(ns string, ms int, action, taskID, queue, state string, public bool) *tessera.AuditEvent {
		when := at(time.Duration(ms) * time.Millisecond)
		return &tessera.AuditEvent{ID: tessera.IDFloor(when), Time: when, Namespace: ns, PrincipalID: "p1", KeyID: "k1",
			Action: action, Target: taskID, TaskID: taskID, Queue: queue, State: state, Status: 200, IPHash: "h", Public: public}
	}

	t.Run("the audit trail streams forward from a cursor", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		secret := taskFixture("01SECRET", taskOpts{queue: "mail"})
		shown := taskFixture("01SHOWN", taskOpts{queue: "build"})
		shown.Public = true
		insertTasks(t, s, secret, shown)
		events := []*tessera.AuditEvent{
			streamEvent("main", 1, "task.enqueue", secret.ID, "mail", "ready", false),
			streamEvent("main", 2, "task.get", secret.ID, "", "", false), // a read, no state
			streamEvent("main", 3, "task.enqueue", shown.ID, "build", "ready", true),
			streamEvent("other", 4, "task.enqueue", "01ELSEWHERE", "mail", "ready", false),
			streamEvent("main", 5, "claim.grant", secret.ID, "mail", "leased", false),
			streamEvent("main", 6, "claim.submit", shown.ID, "build", "succeeded", true),
		}
		// A record written under the shown task's lease names the task.
		rec := streamEvent("main", 7, "record.write", shown.ID, "build", "", true)
		rec.Target, rec.RunID = "reports/r1", "run-1"
		events = append(events, rec)
		writeTx(t, s, func(tx store.Tx) error {
			for _, e := range events {
				if err := tx.AuditInsert(ctx, e); err != nil {
					return err
				}
			}
			return nil
		})
		changes := []string{"task.enqueue", "claim.grant", "claim.submit", "record.write"}
		ms := func(n int) string { return tessera.IDFloor(at(time.Duration(n) * time.Millisecond)) }
		cases := []struct {
			name string
			f    store.StreamFilter
			want []string // ids
		}{
			{"every change", store.StreamFilter{Actions: changes, Limit: 10}, []string{ms(1), ms(3), ms(5), ms(6), ms(7)}},
			{"after a cursor", store.StreamFilter{After: ms(3), Actions: changes, Limit: 10}, []string{ms(5), ms(6), ms(7)}},
			{"a page", store.StreamFilter{Actions: changes, Limit: 2}, []string{ms(1), ms(3)}},
			{"reads too", store.StreamFilter{Actions: []string{"task.get"}, Limit: 10}, []string{ms(2)}},
			{"one queue", store.StreamFilter{Actions: changes, Queue: "build", Limit: 10}, []string{ms(3), ms(6), ms(7)}},
			{"one task", store.StreamFilter{Actions: changes, TaskID: secret.ID, Limit: 10}, []string{ms(1), ms(5)}},
			{"public only", store.StreamFilter{Actions: changes, Public: true, Limit: 10}, []string{ms(3), ms(6), ms(7)}},
			{"public after a cursor", store.StreamFilter{After: ms(6), Actions: changes, Public: true, Limit: 10}, []string{ms(7)}},
			// The newest three events are 5, 6 and 7; of them one is about
			// the secret task.
			{"the newest only", store.StreamFilter{Actions: changes, TaskID: secret.ID, Scan: 3, Limit: 10}, []string{ms(5)}},
		}
		readTx(t, s, func(tx store.Tx) error {
			for _, c := range cases {
				c.f.Namespace = "main"
				got, err := tx.AuditStream(ctx, c.f)
				if err != nil {
					return err
				}
				var gotIDs []string
				for _, e := range got {
					gotIDs = append(gotIDs, e.ID)
				}
				if !slices.Equal(gotIDs, c.want) {
					t.Errorf("%s: %v, want %v", c.name, gotIDs, c.want)
				}
			}
			return nil
		})
		readTx(t, s, func(tx store.Tx) error {
			got, err := tx.AuditStream(ctx, store.StreamFilter{Namespace: "main", Actions: changes, Limit: 10})
			if err != nil {
				return err
			}
			want := store.StreamEvent{AuditEvent: *rec, Title: shown.Title}
			// What a stream needs, and nothing it must not show.
			want.KeyID, want.IPHash, want.Status = "", "", 0
			if got[4] != want {
				t.Errorf("record event %+v, want %+v", got[4], want)
			}
			if got[0].Title != secret.Title || got[2].State != "leased" || got[2].Queue != "mail" {
				t.Errorf("events %+v", got)
			}
			pub, err := tx.AuditStream(ctx, store.StreamFilter{Namespace: "main", Actions: changes, Public: true, Limit: 10})
			if err != nil {
				return err
			}
			if pub[0].Title != shown.Title {
				t.Errorf("a public event's title %q, want %q", pub[0].Title, shown.Title)
			}
			return nil
		})
	})

	t.Run("a public read shows no private title", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		secret := taskFixture("01SECRET", taskOpts{})
		insertTasks(t, s, secret)
		// A public event that names a private task (its task was made
		// private after): the title stays hidden.
		writeTx(t, s, func(tx store.Tx) error {
			return tx.AuditInsert(ctx, streamEvent("main", 1, "task.enqueue", secret.ID, "default", "ready", true))
		})
		readTx(t, s, func(tx store.Tx) error {
			got, err := tx.AuditStream(ctx, store.StreamFilter{Namespace: "main", Actions: []string{"task.enqueue"}, Public: true, Limit: 10})
			if err != nil {
				return err
			}
			if len(got) != 1 || got[0].Title != "" {
				t.Errorf("public events %+v: want one, without a title", got)
			}
			return nil
		})
	})

	t.Run("throughput counts minutes of a bounded look", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		base := epoch.Truncate(time.Minute).Add(time.Minute)
		event := func(d time.Duration, action, queue, state string) *tessera.AuditEvent {
			when := base.Add(d)
			return &tessera.AuditEvent{ID: tessera.IDFloor(when), Time: when, Namespace: "main", PrincipalID: "p1", KeyID: "k1",
				Action: action, Target: "t", TaskID: "t", Queue: queue, State: state, Status: 200}
		}
		writeTx(t, s, func(tx store.Tx) error {
			for _, e := range []*tessera.AuditEvent{
				event(-2*time.Minute, "claim.submit", "build", "succeeded"), // before since
				event(0, "claim.submit", "build", "succeeded"),
				event(time.Second, "claim.submit", "build", "succeeded"),
				event(2*time.Second, "claim.submit", "build", "dead"),
				event(3*time.Second, "task.get", "build", ""),
				event(time.Minute, "task.lapse", "mail", "scheduled"),
				event(time.Minute+time.Second, "claim.submit", "build", "succeeded"),
			} {
				if err := tx.AuditInsert(ctx, e); err != nil {
					return err
				}
			}
			return nil
		})
		actions := []string{"claim.submit", "task.lapse"}
		readTx(t, s, func(tx store.Tx) error {
			got, err := tx.AuditThroughput(ctx, "main", base, actions, 100)
			if err != nil {
				return err
			}
			want := []store.Throughput{
				{Minute: base, Queue: "build", State: "dead", Count: 1},
				{Minute: base, Queue: "build", State: "succeeded", Count: 2},
				{Minute: base.Add(time.Minute), Queue: "build", State: "succeeded", Count: 1},
				{Minute: base.Add(time.Minute), Queue: "mail", State: "scheduled", Count: 1},
			}
			if !slices.Equal(got, want) {
				t.Errorf("throughput %+v, want %+v", got, want)
			}
			// The newest two events only.
			got, err = tx.AuditThroughput(ctx, "main", base, actions, 2)
			if err != nil {
				return err
			}
			if !slices.Equal(got, want[2:]) {
				t.Errorf("throughput of the newest two %+v, want %+v", got, want[2:])
			}
			return nil
		})
	})

	t.Run("queues pause and resume once", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		pause := func(ns, queue string) (changed bool) {
			writeTx(t, s, func(tx store.Tx) (err error) {
				changed, err = tx.QueuePause(ctx, store.QueuePause{Namespace: ns, Queue: queue, PausedBy: "p1", PausedAt: epoch})
				return err
			})
			return changed
		}
		resume := func(ns, queue string) (changed bool) {
			writeTx(t, s, func(tx store.Tx) (err error) {
				changed, err = tx.QueueResume(ctx, ns, queue)
				return err
			})
			return changed
		}
		paused := func(ns string) (out []store.QueuePause) {
			readTx(t, s, func(tx store.Tx) (err error) {
				out, err = tx.QueuesPaused(ctx, ns)
				return err
			})
			return out
		}
		if !pause("main", "mail") || pause("main", "mail") || !pause("main", "build") || !pause("other", "mail") {
			t.Fatal("a pause of an unpaused queue changes it, and only that")
		}
		want := []store.QueuePause{
			{Namespace: "main", Queue: "build", PausedBy: "p1", PausedAt: epoch},
			{Namespace: "main", Queue: "mail", PausedBy: "p1", PausedAt: epoch},
		}
		if got := paused("main"); !slices.Equal(got, want) {
			t.Fatalf("paused %+v, want %+v", got, want)
		}
		if !resume("main", "mail") || resume("main", "mail") {
			t.Fatal("a resume of a paused queue changes it, and only that")
		}
		if got := paused("main"); !slices.Equal(got, want[:1]) {
			t.Fatalf("paused after a resume %+v, want %+v", got, want[:1])
		}
		// A namespace purge takes its pauses along.
		writeTx(t, s, func(tx store.Tx) error {
			for {
				n, err := tx.NamespacePurge(ctx, "other", 100)
				if err != nil || n == 0 {
					return err
				}
			}
		})
		if got := paused("other"); len(got) != 0 {
			t.Fatalf("paused after a purge: %+v", got)
		}
	})

	t.Run("tasks are searched by title, state and creation", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		mk := func(id, queue, state, title string) *tessera.Task {
			task := taskFixture(id, taskOpts{queue: queue, state: state, labels: []string{"l-" + queue}})
			task.Title = title
			return task
		}
		t1 := mk("01A", "build", tessera.StateDead, "Build the DOCS")
		t2 := mk("01B", "build", tessera.StateReady, "build the site")
		t3 := mk("01C", "mail", tessera.StateDead, "send the docs")
		t4 := mk("01D", "build", tessera.StateCanceled, "École docs") // É is no ASCII letter
		t5 := mk("01E", "build", tessera.StateReady, "later docs")
		t5.RunAt = at(time.Hour)
		insertTasks(t, s, t1, t2, t3, t4, t5)
		cases := []struct {
			name string
			f    store.TaskSearch
			want []string
		}{
			{"everything", store.TaskSearch{Limit: 10}, []string{"01E", "01D", "01C", "01B", "01A"}},
			{"title, any case", store.TaskSearch{Title: "DoCs", Limit: 10}, []string{"01E", "01D", "01C", "01A"}},
			{"a non-ASCII letter as it is", store.TaskSearch{Title: "éCOLE", Limit: 10}, nil},
			{"states", store.TaskSearch{States: []string{tessera.StateDead, tessera.StateCanceled}, Limit: 10}, []string{"01D", "01C", "01A"}},
			{"queue and title", store.TaskSearch{Queue: "build", Title: "docs", Limit: 10}, []string{"01E", "01D", "01A"}},
			{"label", store.TaskSearch{Label: "l-mail", Limit: 10}, []string{"01C"}},
			{"scheduled", store.TaskSearch{States: []string{tessera.StateReady}, RunAtAfter: epoch, Limit: 10}, []string{"01E"}},
			{"ready now", store.TaskSearch{States: []string{tessera.StateReady}, RunAtUpTo: epoch, Limit: 10}, []string{"01B"}},
			{"an id range", store.TaskSearch{After: "01A", Before: "01D", Limit: 10}, []string{"01C", "01B"}},
			{"a page", store.TaskSearch{Title: "docs", Limit: 2}, []string{"01E", "01D"}},
		}
		readTx(t, s, func(tx store.Tx) error {
			for _, c := range cases {
				got, err := tx.TaskSearch(ctx, "main", c.f)
				if err != nil {
					return err
				}
				if g := ids(got); !slices.Equal(g, c.want) && (len(g) != 0 || len(c.want) != 0) {
					t.Errorf("%s: %v, want %v", c.name, g, c.want)
				}
			}
			got, err := tx.TaskSearch(ctx, "main", store.TaskSearch{Title: "site", Limit: 1})
			if err != nil {
				return err
			}
			want := *t2
			want.Version = got[0].Version
			if len(got) != 1 || got[0].Title != want.Title || got[0].Brief != want.Brief || string(got[0].Payload) != string(want.Payload) {
				t.Errorf("a found task %+v, want %+v", got[0], want)
			}
			return nil
		})
	})

	t.Run("a queue's finished tasks are purged with their history and gates", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		dead := taskFixture("01A", taskOpts{queue: "build", state: tessera.StateDead})
		done := taskFixture("01B", taskOpts{queue: "build", state: tessera.StateSucceeded})
		live := taskFixture("01C", taskOpts{queue: "build", state: tessera.StateReady})
		elsewhere := taskFixture("01D", taskOpts{queue: "mail", state: tessera.StateDead})
		insertTasks(t, s, dead, done, live, elsewhere)
		writeTx(t, s, func(tx store.Tx) error {
			if err := tx.GatesInsert(ctx, "main", dead.ID, []tessera.Gate{{Key: "ok", Kind: tessera.GateApproval, Message: "?",
				TimeoutAt: &epoch, OnTimeout: tessera.OnTimeoutFail, OpenedAt: epoch}}); err != nil {
				return err
			}
			return tx.TaskEventAppend(ctx, "main", dead.ID, &tessera.TaskEvent{Kind: tessera.EventNote, Body: "n", Time: epoch})
		})
		purge := func(states []string, limit int) (n int) {
			writeTx(t, s, func(tx store.Tx) (err error) {
				n, err = tx.TaskPurgeFinished(ctx, "main", "build", states, limit)
				return err
			})
			return n
		}
		if n := purge([]string{tessera.StateDead}, 10); n != 1 {
			t.Fatalf("purged %d dead tasks, want 1", n)
		}
		if n := purge([]string{tessera.StateSucceeded, tessera.StateDead, tessera.StateCanceled}, 10); n != 1 {
			t.Fatalf("purged %d finished tasks, want 1", n)
		}
		if n := purge([]string{tessera.StateSucceeded}, 10); n != 0 {
			t.Fatalf("purged %d again, want 0", n)
		}
		readTx(t, s, func(tx store.Tx) error {
			for _, id := range []string{dead.ID, done.ID} {
				if _, err := tx.TaskGet(ctx, "main", id); err == nil {
					t.Errorf("task %s outlived its purge", id)
				}
			}
			for _, id := range []string{live.ID, elsewhere.ID} {
				if _, err := tx.TaskGet(ctx, "main", id); err != nil {
					t.Errorf("task %s: %v", id, err)
				}
			}
			evs, err := tx.TaskEventList(ctx, "main", dead.ID, 0, 10)
			if err != nil || len(evs) != 0 {
				t.Errorf("the purged task's events: %v, %v", evs, err)
			}
			// Its gates go with it, off the timers' index too.
			gates, err := tx.GatesOf(ctx, "main", dead.ID)
			if err != nil || len(gates) != 0 {
				t.Errorf("the purged task's gates: %v, %v", gates, err)
			}
			due, err := tx.GatesTimingOut(ctx, 10)
			if err != nil || len(due) != 0 {
				t.Errorf("the purged task's gate still timing out: %v, %v", due, err)
			}
			counts, err := tx.TaskStateCounts(ctx, "main", store.AllTasks)
			for _, c := range counts {
				if c.Queue == "build" && c.State != tessera.StateReady && c.Count != 0 {
					t.Errorf("counts after the purge: %+v", c)
				}
			}
			return err
		})
	})
}
