package storetest

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// The fleet's primitives (store.FleetTx): lanes are made once and found
// again, each is a range of ready tasks in claim order that a claim takes
// from alone, a group's live leases are counted to a limit, and the rows
// of groups, queues and claimants read back what was written.
func testFleet(t *testing.T, open Opener) {
	t.Run("LanesAreRangesInClaimOrder", func(t *testing.T) {
		s := open(t)
		ctx := t.Context()
		var gpu, tenant int64
		writeTx(t, s, func(tx store.Tx) error {
			var created bool
			var err error
			if gpu, created, err = tx.LaneEnsure(ctx, "main", "q", "", []string{"gpu"}, epoch); err != nil || !created || gpu == 0 {
				t.Fatalf("first lane: %d %v %v", gpu, created, err)
			}
			again, created, err := tx.LaneEnsure(ctx, "main", "q", "", []string{"gpu"}, epoch)
			if err != nil || created || again != gpu {
				t.Fatalf("the same lane again: %d %v %v, want %d, not created", again, created, err, gpu)
			}
			tenant, _, err = tx.LaneEnsure(ctx, "main", "q", "tenant", []string{"gpu", "repo:x"}, epoch)
			return err
		})
		lane := func(id string, l int64, o taskOpts) *tessera.Task {
			o.queue = "q"
			task := taskFixture(id, o)
			task.Lane = l
			if l == gpu {
				task.Requires = []string{"gpu"}
			}
			if l == tenant {
				task.Group, task.Requires = "tenant", []string{"gpu", "repo:x"}
			}
			return task
		}
		insertTasks(t, s,
			lane("01A", 0, taskOpts{runAt: at(-time.Minute)}),
			lane("01B", gpu, taskOpts{runAt: at(-time.Hour)}),
			lane("01C", gpu, taskOpts{runAt: at(-time.Minute), priority: 2}),
			lane("01D", tenant, taskOpts{runAt: at(time.Hour)}), // not yet
			lane("01E", tenant, taskOpts{runAt: at(-time.Second)}),
		)
		readTx(t, s, func(tx store.Tx) error {
			task, err := tx.TaskGet(ctx, "main", "01E")
			if err != nil || task.Group != "tenant" || !slices.Equal(task.Requires, []string{"gpu", "repo:x"}) || task.Lane != tenant {
				t.Fatalf("task read back %+v %v", task, err)
			}
			lanes, err := tx.LaneList(ctx, "main", "q")
			want := []store.Lane{{ID: gpu, Requires: []string{"gpu"}}, {ID: tenant, Group: "tenant", Requires: []string{"gpu", "repo:x"}}}
			if err != nil || !reflect.DeepEqual(lanes, want) {
				t.Fatalf("lanes %+v %v, want %+v", lanes, err, want)
			}
			queues, err := tx.QueuesFleet(ctx, "main")
			if err != nil || !slices.Equal(queues, []string{"q"}) {
				t.Fatalf("fleet queues %v %v", queues, err)
			}
			heads, err := tx.LaneHeads(ctx, "main", "q", []int64{0, gpu, tenant, 999}, epoch)
			wantHeads := []store.LaneHead{{Lane: 0, RunAt: at(-time.Minute), TaskID: "01A"}, {Lane: gpu, Priority: 2, RunAt: at(-time.Minute), TaskID: "01C"},
				{Lane: tenant, RunAt: at(-time.Second), TaskID: "01E"}}
			if err != nil || !reflect.DeepEqual(heads, wantHeads) {
				t.Fatalf("heads %+v %v, want %+v", heads, err, wantHeads)
			}
			ready, err := tx.LaneReady(ctx, "main", "q", []int64{gpu, tenant}, epoch)
			wantReady := map[int64]store.LaneCount{gpu: {Ready: 2, Oldest: at(-time.Hour)}, tenant: {Ready: 2, Oldest: at(-time.Second)}}
			if err != nil || !reflect.DeepEqual(ready, wantReady) {
				t.Fatalf("lane ready %+v %v, want %+v", ready, err, wantReady)
			}
			return nil
		})
		// A claim of a lane takes its head and nothing of another lane.
		for _, want := range []string{"01C", "01B", ""} {
			var got *tessera.Task
			writeTx(t, s, func(tx store.Tx) (err error) {
				p := claimFixture("main", "q", epoch, "run-"+want)
				p.Lane = gpu
				got, err = tx.TaskClaim(ctx, p)
				if want == "" {
					wantErr(t, "claim of an empty lane", err, store.ErrNotFound)
					return nil
				}
				return err
			})
			if want != "" && got.ID != want {
				t.Fatalf("claim of the gpu lane got %s, want %s", got.ID, want)
			}
		}
	})

	t.Run("GroupLeasesCountsLiveLeasesToALimit", func(t *testing.T) {
		s := open(t)
		ctx := t.Context()
		leased := func(id, group string, expires time.Duration) *tessera.Task {
			task := taskFixture(id, taskOpts{queue: "q", state: tessera.StateLeased,
				lease: &tessera.Lease{RunID: "r" + id, Holder: "p", TokenHash: []byte("h"), ExpiresAt: at(expires), Seconds: 60}})
			task.Group = group
			return task
		}
		insertTasks(t, s, leased("01A", "g", time.Minute), leased("01B", "g", time.Minute), leased("01C", "g", -time.Second),
			leased("01D", "h", time.Minute), leased("01E", "g", 2*time.Minute))
		readTx(t, s, func(tx store.Tx) error {
			for limit, want := range map[int]int{1: 1, 2: 2, 10: 3} {
				if n, err := tx.GroupLeases(ctx, "main", "q", "g", epoch, limit); err != nil || n != want {
					t.Fatalf("live leases of g up to %d: %d %v, want %d", limit, n, err, want)
				}
			}
			return nil
		})
	})

	t.Run("RowsReadBackWhatWasWritten", func(t *testing.T) {
		s := open(t)
		ctx := t.Context()
		writeTx(t, s, func(tx store.Tx) error {
			_, err := tx.QueueFleetGet(ctx, "main", "q", true)
			wantErr(t, "queue without a row", err, store.ErrNotFound)
			q := &store.QueueFleet{Namespace: "main", Queue: "q", GroupMaxRunning: 3, Rate: tessera.Rate{PerSecond: 0.5, Burst: 2},
				Bucket: store.Bucket{Tokens: 1.25, At: epoch}}
			if err := tx.QueueFleetPut(ctx, q); err != nil {
				return err
			}
			if got, err := tx.QueueFleetGet(ctx, "main", "q", false); err != nil || !reflect.DeepEqual(got, q) {
				t.Fatalf("queue row %+v %v, want %+v", got, err, q)
			}
			g, err := tx.GroupLock(ctx, "main", "q", "tenant")
			if want := (&store.Group{Namespace: "main", Queue: "q", Group: "tenant", Bucket: store.Bucket{At: time.UnixMilli(0).UTC()}}); err != nil || !reflect.DeepEqual(g, want) {
				t.Fatalf("new group %+v %v, want %+v", g, err, want)
			}
			g.MaxRunning, g.Rate, g.Bucket = ptr(4), tessera.Rate{PerSecond: 2, Burst: 3}, store.Bucket{Tokens: 2.5, At: epoch}
			g.CooldownUntil, g.LastGranted = ptr(at(time.Minute)), epoch
			if err := tx.GroupPut(ctx, g); err != nil {
				return err
			}
			got, err := tx.GroupsGet(ctx, "main", "q", []string{"tenant", "none"})
			if err != nil || len(got) != 1 || !reflect.DeepEqual(got["tenant"], *g) {
				t.Fatalf("groups %+v %v, want %+v", got, err, *g)
			}
			list, err := tx.GroupList(ctx, "main", "q", "", 10)
			if err != nil || len(list) != 1 || !reflect.DeepEqual(list[0], *g) {
				t.Fatalf("group list %+v %v", list, err)
			}
			// A newer sighting moves seen_at; an older one does not.
			for _, when := range []time.Time{epoch, at(time.Minute), epoch} {
				if err := tx.ClaimantSeen(ctx, "main", "q", []string{"gpu"}, when); err != nil {
					return err
				}
			}
			if err := tx.ClaimantSeen(ctx, "main", "q", nil, at(-time.Hour)); err != nil {
				return err
			}
			seen, err := tx.ClaimantList(ctx, "main", "q", at(-2*time.Hour), 10)
			want := []store.Claimant{{Capabilities: []string{"gpu"}, SeenAt: at(time.Minute)}, {SeenAt: at(-time.Hour)}}
			if err != nil || !reflect.DeepEqual(seen, want) {
				t.Fatalf("claimants %+v %v, want %+v", seen, err, want)
			}
			return nil
		})
	})
}
