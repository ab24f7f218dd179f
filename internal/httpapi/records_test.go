package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// record is a record version as the API returns it.
type record struct {
	Bucket    string          `json:"bucket"`
	Key       string          `json:"key"`
	Version   int64           `json:"version"`
	Value     json.RawMessage `json:"value"`
	RunID     string          `json:"run_id"`
	TaskID    string          `json:"task_id"`
	WrittenBy string          `json:"written_by"`
	CreatedAt time.Time       `json:"created_at"`
}

type recordList struct {
	Records    []record `json:"records"`
	Versions   []record `json:"versions"`
	NextCursor string   `json:"next_cursor"`
}

// putRecord writes body to bucket/key in ns and expects status.
func (s *testServer) putRecord(want int, ns, key, bucketKey string, body map[string]any, headers ...string) record {
	s.t.Helper()
	var r record
	s.must(want, "PUT", nsPath(ns, "/v1/records/"+bucketKey), key, body, headers...).decode(s.t, &r)
	return r
}

func (s *testServer) getRecord(ns, key, path string) record {
	s.t.Helper()
	var r record
	s.must(200, "GET", nsPath(ns, "/v1/records/"+path), key, nil).decode(s.t, &r)
	return r
}

// versionCount counts the versions of bucket/key in the store itself.
func (s *testServer) versionCount(ns, bucket, key string) int {
	s.t.Helper()
	var n int
	ctx := context.Background()
	err := s.DB.View(ctx, func(tx store.Tx) error {
		vs, err := tx.RecordVersions(ctx, ns, bucket, key, 0, 1000)
		n = len(vs)
		return err
	})
	if err != nil {
		s.t.Fatal(err)
	}
	return n
}

// Every write makes version n+1; old versions stay readable; the head is
// the newest.
func TestRecordVersions(t *testing.T) {
	s := newTestServer(t)
	w, wID := s.newKey("agent", "namespace:main", "write", "read")

	v1 := s.putRecord(201, "main", w, "notes/today", map[string]any{"value": map[string]any{"n": 1}})
	if v1.Version != 1 || v1.Bucket != "notes" || v1.Key != "today" || v1.WrittenBy != wID || v1.Value != nil {
		t.Fatalf("v1: %+v", v1)
	}
	v2 := s.putRecord(200, "main", w, "notes/today", map[string]any{"value": []int{2, 2}})
	if v2.Version != 2 {
		t.Fatalf("v2: %+v", v2)
	}
	if head := s.getRecord("main", w, "notes/today"); head.Version != 2 || string(head.Value) != `[2,2]` {
		t.Fatalf("head: %+v", head)
	}
	if old := s.getRecord("main", w, "notes/today?version=1"); old.Version != 1 || string(old.Value) != `{"n":1}` {
		t.Fatalf("version 1: %+v", old)
	}
	wantError(t, s.do("GET", "/v1/records/notes/today?version=3", w, nil), 404, "not_found", "")
	wantError(t, s.do("GET", "/v1/records/notes/other", w, nil), 404, "not_found", "")
	wantError(t, s.do("GET", "/v1/records/notes/today?version=0", w, nil), 400, "invalid_request", "version")

	// Whitespace is not stored: the value is kept compacted.
	s.must(200, "PUT", "/v1/records/notes/today", w, `{"value": { "spaced" : [ 1, 2 ] } }`)
	if head := s.getRecord("main", w, "notes/today"); string(head.Value) != `{"spaced":[1,2]}` {
		t.Fatalf("compacted value: %s", head.Value)
	}
	// Any JSON value, null included, is a value; a missing one is not.
	s.putRecord(201, "main", w, "notes/nothing", map[string]any{"value": nil})
	if r := s.getRecord("main", w, "notes/nothing"); string(r.Value) != "null" {
		t.Fatalf("null value: %s", r.Value)
	}
	wantError(t, s.do("PUT", "/v1/records/notes/x", w, map[string]any{}), 400, "invalid_request", "value")
}

// if_version is optimistic concurrency: a mismatch is 409 version_conflict
// and writes nothing; 0 means "only if it does not exist".
func TestRecordIfVersion(t *testing.T) {
	s := newTestServer(t)
	w, _ := s.newKey("agent", "namespace:main", "write", "read")

	s.putRecord(201, "main", w, "cfg/a", map[string]any{"value": 1, "if_version": 0})
	wantError(t, s.do("PUT", "/v1/records/cfg/a", w, map[string]any{"value": 2, "if_version": 0}), 409, "version_conflict", "")
	wantError(t, s.do("PUT", "/v1/records/cfg/a", w, map[string]any{"value": 2, "if_version": 7}), 409, "version_conflict", "")
	if n := s.versionCount("main", "cfg", "a"); n != 1 {
		t.Fatalf("a conflict wrote a version: %d versions", n)
	}
	if r := s.putRecord(200, "main", w, "cfg/a", map[string]any{"value": 2, "if_version": 1}); r.Version != 2 {
		t.Fatalf("conditional write: %+v", r)
	}
	// Two writers that read version 2: the first wins, the second conflicts.
	s.putRecord(200, "main", w, "cfg/a", map[string]any{"value": "first", "if_version": 2})
	wantError(t, s.do("PUT", "/v1/records/cfg/a", w, map[string]any{"value": "second", "if_version": 2}), 409, "version_conflict", "")
	if head := s.getRecord("main", w, "cfg/a"); head.Version != 3 || string(head.Value) != `"first"` {
		t.Fatalf("head after the race: %+v", head)
	}
	wantError(t, s.do("PUT", "/v1/records/cfg/b", w, map[string]any{"value": 1, "if_version": 1}), 409, "version_conflict", "")
	wantError(t, s.do("GET", "/v1/records/cfg/b", w, nil), 404, "not_found", "")
	wantError(t, s.do("PUT", "/v1/records/cfg/b", w, map[string]any{"value": 1, "if_version": -1}), 400, "invalid_request", "if_version")
}

// A write carrying a live lease token binds the version to the lease's run
// and task; reading it names them. A stale token is lease_lost.
func TestRecordExecutionRecord(t *testing.T) {
	s := newTestServer(t)
	producer, _ := s.newKey("service", "namespace:main", "enqueue", "read")
	worker, _ := s.newKey("agent", "namespace:main", "claim", "write", "read")
	task := s.enqueue("main", producer, map[string]any{"title": "summarize"})
	c := s.claim("main", worker, "default")

	r := s.putRecord(201, "main", worker, "results/"+task.ID, map[string]any{"value": map[string]any{"ok": true}, "lease_token": c.Lease.Token})
	if r.RunID != c.Lease.RunID || r.TaskID != task.ID {
		t.Fatalf("write under a lease: %+v, want run %s task %s", r, c.Lease.RunID, task.ID)
	}
	if got := s.getRecord("main", producer, "results/"+task.ID); got.RunID != c.Lease.RunID || got.TaskID != task.ID {
		t.Fatalf("read names %q/%q, want %s/%s", got.RunID, got.TaskID, c.Lease.RunID, task.ID)
	}
	// A write without a token names no run.
	if r := s.putRecord(200, "main", worker, "results/"+task.ID, map[string]any{"value": 2}); r.RunID != "" || r.TaskID != "" {
		t.Fatalf("plain write names a run: %+v", r)
	}
	if v1 := s.getRecord("main", producer, "results/"+task.ID+"?version=1"); v1.RunID != c.Lease.RunID {
		t.Fatalf("version 1 lost its run: %+v", v1)
	}

	// Wrong tokens, and the token of a finished run, are lease_lost and
	// write nothing.
	for _, tok := range []string{"nonsense", task.ID + ".wrong", "01ARZ3NDEKTSV4RRFFQ69G5FAV." + c.Lease.Token, strings.Repeat("x", 200)} {
		wantError(t, s.do("PUT", "/v1/records/results/"+task.ID, worker, map[string]any{"value": 3, "lease_token": tok}), 409, "lease_lost", "")
	}
	s.submit("main", worker, c, "succeeded")
	wantError(t, s.do("PUT", "/v1/records/results/"+task.ID, worker, map[string]any{"value": 3, "lease_token": c.Lease.Token}), 409, "lease_lost", "")
	if n := s.versionCount("main", "results", task.ID); n != 2 {
		t.Fatalf("%d versions after refused writes, want 2", n)
	}
}

// A write whose lease has run out is lease_lost, and the lapse is recorded
// on the task as any lease check would.
func TestRecordLapsedLease(t *testing.T) {
	s := newTestServer(t)
	producer, _ := s.newKey("service", "namespace:main", "enqueue", "read")
	worker, _ := s.newKey("agent", "namespace:main", "claim", "write", "read")
	task := s.enqueue("main", producer, map[string]any{"title": "slow"})
	c := s.claim("main", worker, "default")
	s.Clock.Advance(time.Duration(c.Lease.Seconds+1) * time.Second)

	wantError(t, s.do("PUT", "/v1/records/results/x", worker, map[string]any{"value": 1, "lease_token": c.Lease.Token}), 409, "lease_lost", "")
	wantError(t, s.do("GET", "/v1/records/results/x", worker, nil), 404, "not_found", "")
	got := s.task("main", producer, task.ID)
	if got.State == tessera.StateLeased || len(got.Runs) != 1 || got.Runs[0].Outcome != tessera.OutcomeLapsed {
		t.Fatalf("after the refused write the lapse is not recorded: state %s runs %+v", got.State, got.Runs)
	}
}

// Idempotency-Key on a record write: a repeat returns the first answer
// without writing again; another body under the same key is a conflict.
func TestRecordIdempotentWrite(t *testing.T) {
	s := newTestServer(t)
	w, _ := s.newKey("agent", "namespace:main", "write", "read")
	body := map[string]any{"value": map[string]any{"step": 1}}

	first := s.putRecord(201, "main", w, "log/run", body, "Idempotency-Key", "write-1")
	again := s.putRecord(201, "main", w, "log/run", body, "Idempotency-Key", "write-1")
	if first.Version != again.Version || !first.CreatedAt.Equal(again.CreatedAt) {
		t.Fatalf("repeat answered %+v, first %+v", again, first)
	}
	if n := s.versionCount("main", "log", "run"); n != 1 {
		t.Fatalf("a repeat wrote again: %d versions", n)
	}
	wantError(t, s.do("PUT", "/v1/records/log/run", w, map[string]any{"value": 2}, "Idempotency-Key", "write-1"), 409, "idempotency_conflict", "")
	// The same key on another record is another request.
	s.putRecord(201, "main", w, "log/other", body, "Idempotency-Key", "write-1")
	// A new key writes the next version.
	if r := s.putRecord(200, "main", w, "log/run", body, "Idempotency-Key", "write-2"); r.Version != 2 {
		t.Fatalf("new key: %+v", r)
	}
	wantError(t, s.do("PUT", "/v1/records/log/run", w, body, "Idempotency-Key", strings.Repeat("k", 129)), 400, "invalid_request", "Idempotency-Key")
}

// Listing a bucket's heads with a prefix, and a record's history, page
// with opaque cursors.
func TestRecordListingAndPagination(t *testing.T) {
	s := newTestServer(t)
	w, _ := s.newKey("agent", "namespace:main", "write", "read")
	for _, k := range []string{"a-1", "a-2", "a-3", "a-4", "a-5", "b-1", "a"} {
		s.putRecord(201, "main", w, "docs/"+k, map[string]any{"value": k})
	}
	s.putRecord(200, "main", w, "docs/a-2", map[string]any{"value": "a-2 v2"})

	var keys []string
	cursor, pages := "", 0
	for {
		var page recordList
		s.must(200, "GET", "/v1/records/docs?prefix=a-&limit=2&cursor="+cursor, w, nil).decode(t, &page)
		pages++
		for _, r := range page.Records {
			keys = append(keys, r.Key+"="+string(r.Value))
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	want := `a-1="a-1" a-2="a-2 v2" a-3="a-3" a-4="a-4" a-5="a-5"`
	if got := strings.Join(keys, " "); got != want || pages != 3 {
		t.Fatalf("prefix listing in %d pages: %s, want %s in 3", pages, got, want)
	}
	var all recordList
	s.must(200, "GET", "/v1/records/docs", w, nil).decode(t, &all)
	if len(all.Records) != 7 || all.NextCursor != "" || all.Records[0].Key != "a" || all.Records[6].Key != "b-1" {
		t.Fatalf("whole bucket: %+v", all)
	}
	var none recordList
	s.must(200, "GET", "/v1/records/empty", w, nil).decode(t, &none)
	if none.Records == nil || len(none.Records) != 0 {
		t.Fatalf("a bucket never written lists %s", s.do("GET", "/v1/records/empty", w, nil).Body)
	}

	for i := 2; i <= 5; i++ {
		s.putRecord(200, "main", w, "docs/b-1", map[string]any{"value": i})
	}
	var versions []int64
	cursor = ""
	for {
		var page recordList
		s.must(200, "GET", "/v1/records/docs/b-1/versions?limit=2&cursor="+cursor, w, nil).decode(t, &page)
		for _, r := range page.Versions {
			versions = append(versions, r.Version)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if fmt.Sprint(versions) != "[5 4 3 2 1]" {
		t.Fatalf("history newest first: %v", versions)
	}
	wantError(t, s.do("GET", "/v1/records/docs/missing/versions", w, nil), 404, "not_found", "")
	wantError(t, s.do("GET", "/v1/records/docs?cursor=!!", w, nil), 400, "invalid_request", "cursor")
	wantError(t, s.do("GET", "/v1/records/docs?limit=201", w, nil), 400, "invalid_request", "limit")
	wantError(t, s.do("GET", "/v1/records/docs?prefix=a%2Fb", w, nil), 400, "invalid_request", "prefix")
}

// A listing page stops early once it carries 1 MiB of values, so a page
// of large values stays bounded; the cursor continues after it.
func TestRecordListingBoundsValueBytes(t *testing.T) {
	s := newTestServer(t)
	w, _ := s.newKey("agent", "namespace:main", "write", "read")
	big := strings.Repeat("v", 200<<10)
	for i := range 7 {
		s.putRecord(201, "main", w, fmt.Sprintf("big/k%d", i), map[string]any{"value": big})
	}
	var page recordList
	s.must(200, "GET", "/v1/records/big", w, nil).decode(t, &page)
	if len(page.Records) != 6 || page.NextCursor == "" {
		t.Fatalf("page of %d records, cursor %q; want 6 and a cursor", len(page.Records), page.NextCursor)
	}
	var page2 recordList
	s.must(200, "GET", "/v1/records/big?cursor="+page.NextCursor, w, nil).decode(t, &page2)
	if len(page2.Records) != 1 || page2.Records[0].Key != "k6" || page2.NextCursor != "" {
		t.Fatalf("second page: %d records, cursor %q", len(page2.Records), page2.NextCursor)
	}
}

// Buckets: created by their first record or by PUT, listed by name; the
// store exposes public buckets' heads for the board.
func TestRecordBuckets(t *testing.T) {
	ctx := t.Context()
	s := newTestServer(t)
	w, _ := s.newKey("agent", "namespace:main", "write", "read")
	reader, _ := s.newKey("agent", "namespace:main", "read")

	s.putRecord(201, "main", w, "private-notes/x", map[string]any{"value": "secret"})
	var b tessera.Bucket
	s.must(200, "PUT", "/v1/buckets/status", w, map[string]any{"public": true}).decode(t, &b)
	if b.Name != "status" || !b.Public || b.CreatedAt.IsZero() {
		t.Fatalf("bucket: %+v", b)
	}
	s.putRecord(201, "main", w, "status/build", map[string]any{"value": "green"})
	s.putRecord(201, "main", w, "status/deploy", map[string]any{"value": "pending"})
	s.putRecord(200, "main", w, "status/deploy", map[string]any{"value": "done"})

	var list struct {
		Buckets []tessera.Bucket `json:"buckets"`
	}
	s.must(200, "GET", "/v1/buckets", reader, nil).decode(t, &list)
	if len(list.Buckets) != 2 || list.Buckets[0].Name != "private-notes" || list.Buckets[0].Public || !list.Buckets[1].Public {
		t.Fatalf("buckets: %+v", list.Buckets)
	}
	var page struct {
		Buckets    []tessera.Bucket `json:"buckets"`
		NextCursor string           `json:"next_cursor"`
	}
	s.must(200, "GET", "/v1/buckets?limit=1", reader, nil).decode(t, &page)
	if len(page.Buckets) != 1 || page.NextCursor == "" {
		t.Fatalf("bucket page: %+v", page)
	}
	page2 := page
	page2.NextCursor = ""
	s.must(200, "GET", "/v1/buckets?limit=1&cursor="+page.NextCursor, reader, nil).decode(t, &page2)
	if len(page2.Buckets) != 1 || page2.Buckets[0].Name != "status" || page2.NextCursor != "" {
		t.Fatalf("bucket page 2: %+v", page2)
	}

	var heads []tessera.Record
	err := s.DB.View(context.Background(), func(tx store.Tx) error {
		var err error
		heads, err = tx.RecordPublicHeads(ctx, "main", "", "", 100)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range heads {
		got = append(got, fmt.Sprintf("%s/%s@%d=%s", h.Bucket, h.Key, h.Version, h.Value))
	}
	if strings.Join(got, " ") != `status/build@1="green" status/deploy@2="done"` {
		t.Fatalf("public heads: %v", got)
	}

	// Setting a bucket needs write; making it private again hides it.
	wantError(t, s.do("PUT", "/v1/buckets/status", reader, map[string]any{"public": false}), 403, "forbidden", "")
	s.must(200, "PUT", "/v1/buckets/status", w, map[string]any{"public": false}).decode(t, &b)
	if b.Public || b.CreatedAt.After(b.UpdatedAt) {
		t.Fatalf("bucket made private: %+v", b)
	}
	wantError(t, s.do("PUT", "/v1/buckets/status", w, map[string]any{"public": "yes"}), 400, "invalid_request", "public")
}

// Bucket and key names are validated: length and characters, 400 naming
// the field.
func TestRecordMalformedNames(t *testing.T) {
	s := newTestServer(t)
	w, _ := s.newKey("agent", "namespace:main", "write", "read")
	cases := []struct {
		path, field string
	}{
		{"/v1/records/bad%20bucket/k", "bucket"},
		{"/v1/records/-leading/k", "bucket"},
		{"/v1/records/" + strings.Repeat("b", 65) + "/k", "bucket"},
		{"/v1/records/b/" + strings.Repeat("k", 257), "key"},
		{"/v1/records/b/.hidden", "key"},
		{"/v1/records/b/a%2Fb", "key"},
		{"/v1/records/b/%C3%A9t%C3%A9", "key"},
		{"/v1/records/b/semi;colon", "key"},
		{"/v1/records/b/" + "%00", "key"},
	}
	for _, c := range cases {
		wantError(t, s.do("PUT", c.path, w, map[string]any{"value": 1}), 400, "invalid_request", c.field)
		wantError(t, s.do("GET", c.path, w, nil), 400, "invalid_request", c.field)
	}
	wantError(t, s.do("PUT", "/v1/buckets/bad%20bucket", w, map[string]any{"public": true}), 400, "invalid_request", "bucket")
	wantError(t, s.do("GET", "/v1/records/bad%20bucket", w, nil), 400, "invalid_request", "bucket")
	// The widest names accepted.
	s.putRecord(201, "main", w, strings.Repeat("b", 64)+"/"+strings.Repeat("k", 256), map[string]any{"value": 1})
	s.putRecord(201, "main", w, "B.u_c:k-t/_k.e:y=v@1-2", map[string]any{"value": 1})
}

// Values are bounded at 256 KiB (400 naming value, like a task payload);
// a body over 1 MiB is 413 before it is read.
func TestRecordOversized(t *testing.T) {
	s := newTestServer(t)
	w, _ := s.newKey("agent", "namespace:main", "write", "read")
	limit := 256 << 10
	// A JSON string of n characters takes n+2 bytes.
	s.putRecord(201, "main", w, "big/fits", map[string]any{"value": strings.Repeat("x", limit-2)})
	wantError(t, s.do("PUT", "/v1/records/big/over", w, map[string]any{"value": strings.Repeat("x", limit-1)}), 400, "invalid_request", "value")
	wantError(t, s.do("PUT", "/v1/records/big/huge", w, map[string]any{"value": strings.Repeat("x", 1<<20)}), 413, "payload_too_large", "")
	wantError(t, s.do("GET", "/v1/records/big/over", w, nil), 404, "not_found", "")
	wantError(t, s.do("PUT", "/v1/records/big/deep", w, strings.Repeat("[", 40)), 400, "invalid_request", "")
	wantError(t, s.do("PUT", "/v1/records/big/x", w, map[string]any{"value": 1, "extra": 2}), 400, "invalid_request", "extra")
}

// Records belong to their namespace, and need the grant and the scope.
func TestRecordNamespacesAndScopes(t *testing.T) {
	s := newTestServer(t)
	a, _ := s.newKey("agent", "namespace:alpha", "write", "read")
	readOnly, _ := s.newKey("agent", "namespace:alpha", "read")
	s.putRecord(201, "alpha", a, "b/k", map[string]any{"value": "in alpha"})
	s.putRecord(201, "main", adminKey, "b/k", map[string]any{"value": "in main"})
	if r := s.getRecord("alpha", readOnly, "b/k"); string(r.Value) != `"in alpha"` {
		t.Fatalf("alpha: %s", r.Value)
	}
	if r := s.getRecord("main", adminKey, "b/k"); string(r.Value) != `"in main"` {
		t.Fatalf("main: %s", r.Value)
	}
	wantError(t, s.do("PUT", "/ns/alpha/v1/records/b/k", readOnly, map[string]any{"value": 1}), 403, "forbidden", "")
	wantError(t, s.do("GET", "/v1/records/b/k", a, nil), 403, "forbidden", "")
	wantError(t, s.do("GET", "/ns/beta/v1/records/b/k", adminKey, nil), 404, "not_found", "")
}

// The rows a record write costs, by the meter: version 1 (new bucket, new
// key), version 1 of another key in that bucket, and version 2. The
// namespace exists already, as it does for a worker.
func TestRecordRowsWritten(t *testing.T) {
	// The exact figures are the SQLite meter's (SPEC §14's table).
	sqliteOnly(t)
	s := newTestServer(t)
	w, _ := s.newKey("agent", "namespace:main", "write", "read", "enqueue")
	s.enqueue("main", w, map[string]any{"title": "warm the namespace"})
	written := s.rowsWritten
	v1 := written(func() { s.putRecord(201, "main", w, "rows/a", map[string]any{"value": 1}) })
	v1b := written(func() { s.putRecord(201, "main", w, "rows/b", map[string]any{"value": 1}) })
	v2 := written(func() { s.putRecord(200, "main", w, "rows/a", map[string]any{"value": 2}) })
	v2key := written(func() {
		s.putRecord(200, "main", w, "rows/a", map[string]any{"value": 3}, "Idempotency-Key", "rows-1")
	})
	t.Logf("rows written: record v1 (new bucket) %d, v1 (existing bucket) %d, v2 %d, v2 with Idempotency-Key %d", v1, v1b, v2, v2key)
	// Records' own rows: bucket (first write only), head, version, and the
	// audit event; an idempotency entry is a row and its created_at index
	// entry.
	if v1 > 4 || v1b > 3 || v2 > 3 || v2key > 5 {
		t.Fatalf("record writes cost v1 %d, v1b %d, v2 %d, v2+key %d rows; want ≤ 4, 3, 3, 5", v1, v1b, v2, v2key)
	}
}

// Concurrent writers: without if_version every write lands, each on its
// own version; with the same if_version exactly one wins.
func TestRecordConcurrentWrites(t *testing.T) {
	s := newTestServer(t)
	w, _ := s.newKey("agent", "namespace:main", "write", "read")
	s.putRecord(201, "main", w, "race/k", map[string]any{"value": 0})
	const n = 8
	statuses := func(body func(i int) map[string]any) map[int]int {
		out := make(chan int, n)
		for i := range n {
			go func() {
				b, _ := json.Marshal(body(i))
				req, _ := http.NewRequest("PUT", s.URL+"/v1/records/race/k", bytes.NewReader(b))
				req.Header.Set("Authorization", "Bearer "+w)
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					out <- 0
					return
				}
				res.Body.Close()
				out <- res.StatusCode
			}()
		}
		counts := map[int]int{}
		for range n {
			counts[<-out]++
		}
		return counts
	}
	if got := statuses(func(i int) map[string]any { return map[string]any{"value": i, "if_version": 1} }); got[200] != 1 || got[409] != n-1 {
		t.Fatalf("conditional race: %v, want one 200 and %d 409", got, n-1)
	}
	if got := statuses(func(i int) map[string]any { return map[string]any{"value": i} }); got[200] != n {
		t.Fatalf("unconditional writes: %v", got)
	}
	var page recordList
	s.must(200, "GET", "/v1/records/race/k/versions?limit=200", w, nil).decode(t, &page)
	if len(page.Versions) != n+2 || page.Versions[0].Version != n+2 {
		t.Fatalf("%d versions, head %d; want %d", len(page.Versions), page.Versions[0].Version, n+2)
	}
}
