package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tessera-dev/tessera/internal/meter"
	"github.com/tessera-dev/tessera/internal/store"
	"github.com/tessera-dev/tessera/internal/tessera"
)

// recordFixture is version v of ns/bucket/key with value {"v":v}.
func recordFixture(ns, bucket, key string, v int64) *tessera.Record {
	return &tessera.Record{Namespace: ns, Bucket: bucket, Key: key, Version: v,
		Value: json.RawMessage(fmt.Sprintf(`{"v":%d}`, v)), WrittenBy: "p-writer", CreatedAt: at(time.Duration(v) * time.Second)}
}

// putVersions writes versions 1..n of ns/bucket/key.
func putVersions(t *testing.T, s store.Store, ns, bucket, key string, n int64) {
	ctx := t.Context()
	t.Helper()
	writeTx(t, s, func(tx store.Tx) error {
		for v := int64(1); v <= n; v++ {
			if err := tx.RecordPut(ctx, recordFixture(ns, bucket, key, v), v-1); err != nil {
				return err
			}
		}
		return nil
	})
}

func recordKeys(recs []tessera.Record) string {
	var out []string
	for _, r := range recs {
		out = append(out, fmt.Sprintf("%s/%s@%d", r.Bucket, r.Key, r.Version))
	}
	return strings.Join(out, " ")
}

// testRecords covers records, buckets, blobs, uploads and namespace
// settings.
func testRecords(t *testing.T, open Opener) {
	t.Run("RecordRoundTrip", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		r1 := recordFixture("main", "b", "k", 1)
		r1.RunID, r1.TaskID = "run-1", "task-1"
		r2 := recordFixture("main", "b", "k", 2)
		r2.Value = json.RawMessage(`null`)
		writeTx(t, s, func(tx store.Tx) error {
			if err := tx.RecordPut(ctx, r1, 0); err != nil {
				return err
			}
			return tx.RecordPut(ctx, r2, 1)
		})
		readTx(t, s, func(tx store.Tx) error {
			if head, err := tx.RecordHead(ctx, "main", "b", "k"); err != nil || head != 2 {
				t.Fatalf("head: %d, %v", head, err)
			}
			for v, want := range map[int64]*tessera.Record{0: r2, 1: r1, 2: r2} {
				got, err := tx.RecordGet(ctx, "main", "b", "k", v)
				if err != nil {
					t.Fatalf("get version %d: %v", v, err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("get version %d:\n got %+v\nwant %+v", v, got, want)
				}
			}
			_, err := tx.RecordGet(ctx, "main", "b", "k", 3)
			wantErr(t, "missing version", err, store.ErrNotFound)
			_, err = tx.RecordGet(ctx, "main", "b", "other", 0)
			wantErr(t, "missing record", err, store.ErrNotFound)
			_, err = tx.RecordHead(ctx, "main", "b", "other")
			wantErr(t, "missing head", err, store.ErrNotFound)
			_, err = tx.RecordGet(ctx, "other-ns", "b", "k", 0)
			wantErr(t, "other namespace", err, store.ErrNotFound)
			return nil
		})
	})

	t.Run("RecordPutIsCompareAndSet", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		putVersions(t, s, "main", "b", "k", 2)
		for _, c := range []struct {
			v, prev int64
		}{{1, 0}, {2, 1}} {
			err := s.Update(t.Context(), func(tx store.Tx) error {
				return tx.RecordPut(ctx, recordFixture("main", "b", "k", c.v), c.prev)
			})
			wantErr(t, fmt.Sprintf("put %d over %d with the head at 2", c.v, c.prev), err, store.ErrConflict)
		}
		readTx(t, s, func(tx store.Tx) error {
			vs, err := tx.RecordVersions(ctx, "main", "b", "k", 0, 10)
			if err != nil || recordKeys(vs) != "b/k@2 b/k@1" {
				t.Fatalf("after refused puts: %s, %v", recordKeys(vs), err)
			}
			return nil
		})
	})

	t.Run("RecordVersionsNewestFirst", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		putVersions(t, s, "main", "b", "k", 5)
		putVersions(t, s, "main", "b", "k2", 1)
		readTx(t, s, func(tx store.Tx) error {
			for _, c := range []struct {
				before int64
				limit  int
				want   string
			}{
				{0, 2, "b/k@5 b/k@4"},
				{4, 2, "b/k@3 b/k@2"},
				{2, 10, "b/k@1"},
				{1, 10, ""},
			} {
				vs, err := tx.RecordVersions(ctx, "main", "b", "k", c.before, c.limit)
				if err != nil || recordKeys(vs) != c.want {
					t.Errorf("versions before %d limit %d: %q, %v; want %q", c.before, c.limit, recordKeys(vs), err, c.want)
				}
			}
			vs, err := tx.RecordVersions(ctx, "main", "b", "k", 0, 1)
			if err != nil || len(vs) != 1 || string(vs[0].Value) != `{"v":5}` || vs[0].WrittenBy != "p-writer" {
				t.Errorf("versions carry values: %+v, %v", vs, err)
			}
			return nil
		})
	})

	t.Run("RecordHeadsByPrefixAndKey", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		for _, k := range []string{"a", "a-1", "a-2", "a-3", "ab", "b"} {
			putVersions(t, s, "main", "docs", k, 1)
		}
		writeTx(t, s, func(tx store.Tx) error { return tx.RecordPut(ctx, recordFixture("main", "docs", "a-2", 2), 1) })
		putVersions(t, s, "main", "other", "a-1", 1)
		putVersions(t, s, "ns2", "docs", "a-1", 1)
		readTx(t, s, func(tx store.Tx) error {
			for _, c := range []struct {
				prefix, after string
				limit         int
				want          string
			}{
				{"", "", 10, "docs/a@1 docs/a-1@1 docs/a-2@2 docs/a-3@1 docs/ab@1 docs/b@1"},
				{"a-", "", 10, "docs/a-1@1 docs/a-2@2 docs/a-3@1"},
				{"a-", "", 2, "docs/a-1@1 docs/a-2@2"},
				{"a-", "a-2", 2, "docs/a-3@1"},
				{"a", "a-3", 10, "docs/ab@1"},
				{"c", "", 10, ""},
				{"", "ab", 10, "docs/b@1"},
			} {
				heads, err := tx.RecordHeads(ctx, "main", "docs", c.prefix, c.after, c.limit)
				if err != nil || recordKeys(heads) != c.want {
					t.Errorf("heads prefix %q after %q limit %d: %q, %v; want %q", c.prefix, c.after, c.limit, recordKeys(heads), err, c.want)
				}
			}
			heads, err := tx.RecordHeads(ctx, "main", "docs", "a-2", "", 10)
			if err != nil || len(heads) != 1 || string(heads[0].Value) != `{"v":2}` {
				t.Errorf("heads carry the head's value: %+v, %v", heads, err)
			}
			return nil
		})
	})

	// A page of heads costs its records — a seek to each key and one to
	// its newest version — not the bucket's keys or their versions.
	t.Run("RecordHeadsReadThePage", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		writeTx(t, s, func(tx store.Tx) error {
			for i := range 200 {
				for v := int64(1); v <= 3; v++ {
					if err := tx.RecordPut(ctx, recordFixture("main", "b", fmt.Sprintf("k%03d", i), v), v-1); err != nil {
						return err
					}
				}
			}
			return nil
		})
		ctxU, usage := meter.WithUsage(ctx)
		var heads []tessera.Record
		if err := s.View(ctxU, func(tx store.Tx) (err error) {
			heads, err = tx.RecordHeads(ctxU, "main", "b", "k", "k099", 10)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if len(heads) != 10 || heads[0].Key != "k100" || heads[0].Version != 3 || heads[9].Key != "k109" {
			t.Fatalf("heads after k099: %s", recordKeys(heads))
		}
		if read := usage.Read.Load(); read > 10*4+4 {
			t.Errorf("a page of 10 heads of 200 records read %d rows", read)
		}
	})

	t.Run("BucketEnsurePutList", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		writeTx(t, s, func(tx store.Tx) error {
			if err := tx.BucketEnsure(ctx, "main", "logs", epoch); err != nil {
				return err
			}
			// Ensuring again keeps the first row as it was.
			if err := tx.BucketEnsure(ctx, "main", "logs", at(time.Hour)); err != nil {
				return err
			}
			b := &tessera.Bucket{Namespace: "main", Name: "status", Public: true, CreatedAt: at(time.Second), UpdatedAt: at(time.Second)}
			if err := tx.BucketPut(ctx, b); err != nil {
				return err
			}
			// A put over an existing bucket keeps its creation time.
			b = &tessera.Bucket{Namespace: "main", Name: "logs", Public: true, CreatedAt: at(time.Minute), UpdatedAt: at(time.Minute)}
			if err := tx.BucketPut(ctx, b); err != nil {
				return err
			}
			if !b.CreatedAt.Equal(epoch) {
				t.Errorf("put over an existing bucket reports created_at %v, want %v", b.CreatedAt, epoch)
			}
			return tx.BucketEnsure(ctx, "ns2", "zeta", epoch)
		})
		readTx(t, s, func(tx store.Tx) error {
			got, err := tx.BucketGet(ctx, "main", "logs")
			want := &tessera.Bucket{Namespace: "main", Name: "logs", Public: true, CreatedAt: epoch, UpdatedAt: at(time.Minute)}
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("get:\n got %+v, %v\nwant %+v", got, err, want)
			}
			_, err = tx.BucketGet(ctx, "main", "zeta")
			wantErr(t, "bucket of another namespace", err, store.ErrNotFound)
			list, err := tx.BucketList(ctx, "main", "", 10)
			if err != nil || len(list) != 2 || list[0].Name != "logs" || list[1].Name != "status" {
				t.Errorf("list: %+v, %v", list, err)
			}
			list, err = tx.BucketList(ctx, "main", "logs", 10)
			if err != nil || len(list) != 1 || list[0].Name != "status" {
				t.Errorf("list after logs: %+v, %v", list, err)
			}
			list, err = tx.BucketList(ctx, "main", "", 1)
			if err != nil || len(list) != 1 {
				t.Errorf("list limit 1: %+v, %v", list, err)
			}
			return nil
		})
	})

	t.Run("RecordPublicHeads", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		writeTx(t, s, func(tx store.Tx) error {
			for _, b := range []*tessera.Bucket{
				{Namespace: "main", Name: "board", Public: true, CreatedAt: epoch, UpdatedAt: epoch},
				{Namespace: "main", Name: "hidden", CreatedAt: epoch, UpdatedAt: epoch},
				{Namespace: "main", Name: "shown", Public: true, CreatedAt: epoch, UpdatedAt: epoch},
				{Namespace: "ns2", Name: "board", Public: true, CreatedAt: epoch, UpdatedAt: epoch},
			} {
				if err := tx.BucketPut(ctx, b); err != nil {
					return err
				}
			}
			return nil
		})
		putVersions(t, s, "main", "board", "x", 3)
		putVersions(t, s, "main", "board", "y", 1)
		putVersions(t, s, "main", "hidden", "x", 1)
		putVersions(t, s, "main", "shown", "a", 2)
		putVersions(t, s, "ns2", "board", "x", 1)
		readTx(t, s, func(tx store.Tx) error {
			heads, err := tx.RecordPublicHeads(ctx, "main", "", "", 10)
			if err != nil || recordKeys(heads) != "board/x@3 board/y@1 shown/a@2" {
				t.Errorf("public heads: %q, %v", recordKeys(heads), err)
			}
			if err == nil && string(heads[0].Value) != `{"v":3}` {
				t.Errorf("public heads carry the head's value: %s", heads[0].Value)
			}
			heads, err = tx.RecordPublicHeads(ctx, "main", "board", "x", 1)
			if err != nil || recordKeys(heads) != "board/y@1" {
				t.Errorf("public heads after board/x: %q, %v", recordKeys(heads), err)
			}
			heads, err = tx.RecordPublicHeads(ctx, "main", "board", "y", 10)
			if err != nil || recordKeys(heads) != "shown/a@2" {
				t.Errorf("public heads after board/y: %q, %v", recordKeys(heads), err)
			}
			return nil
		})
	})

	t.Run("BlobsAndReaders", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		sum := strings.Repeat("ab", 32)
		b := &tessera.Blob{Namespace: "main", SHA256: sum, Size: 42, ContentType: "text/plain; charset=utf-8",
			UploadedBy: "p-up", RunID: "run-1", TaskID: "task-1", CreatedAt: epoch}
		plain := &tessera.Blob{Namespace: "main", SHA256: strings.Repeat("cd", 32), Size: 0, ContentType: "application/octet-stream",
			UploadedBy: "p-up", CreatedAt: at(time.Second)}
		writeTx(t, s, func(tx store.Tx) error {
			if err := tx.BlobPut(ctx, b); err != nil {
				return err
			}
			if err := tx.BlobPut(ctx, plain); err != nil {
				return err
			}
			if err := tx.BlobReaderAdd(ctx, "main", sum, "p-reader", epoch); err != nil {
				return err
			}
			return tx.BlobReaderAdd(ctx, "main", sum, "p-reader", at(time.Hour))
		})
		err := s.Update(t.Context(), func(tx store.Tx) error { return tx.BlobPut(ctx, b) })
		wantErr(t, "blob put twice", err, store.ErrConflict)
		readTx(t, s, func(tx store.Tx) error {
			for _, want := range []*tessera.Blob{b, plain} {
				got, err := tx.BlobGet(ctx, "main", want.SHA256)
				if err != nil || !reflect.DeepEqual(got, want) {
					t.Errorf("blob get:\n got %+v, %v\nwant %+v", got, err, want)
				}
			}
			_, err := tx.BlobGet(ctx, "ns2", sum)
			wantErr(t, "blob of another namespace", err, store.ErrNotFound)
			for _, c := range []struct {
				ns, principal string
				want          bool
			}{{"main", "p-reader", true}, {"main", "p-up", false}, {"main", "p-other", false}, {"ns2", "p-reader", false}} {
				ok, err := tx.BlobReaderCheck(ctx, c.ns, sum, c.principal)
				if err != nil || ok != c.want {
					t.Errorf("reader %s in %s: %v, %v; want %v", c.principal, c.ns, ok, err, c.want)
				}
			}
			return nil
		})
	})

	t.Run("Uploads", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		mk := func(ns, id string, created time.Time) *tessera.Upload {
			return &tessera.Upload{Namespace: ns, ID: id, SHA256: strings.Repeat("0f", 32), Size: 7, ContentType: "image/png",
				PrincipalID: "p-up", CreatedAt: created}
		}
		old := mk("main", "u-old", epoch)
		old.RunID, old.TaskID = "run-1", "task-1"
		other := mk("ns2", "u-other", at(time.Minute))
		fresh := mk("main", "u-fresh", at(2*time.Hour))
		writeTx(t, s, func(tx store.Tx) error {
			for _, u := range []*tessera.Upload{old, other, fresh} {
				if err := tx.UploadCreate(ctx, u); err != nil {
					return err
				}
			}
			return nil
		})
		err := s.Update(t.Context(), func(tx store.Tx) error { return tx.UploadCreate(ctx, old) })
		wantErr(t, "upload created twice", err, store.ErrConflict)
		readTx(t, s, func(tx store.Tx) error {
			got, err := tx.UploadGet(ctx, "main", "u-old")
			if err != nil || !reflect.DeepEqual(got, old) {
				t.Errorf("upload get:\n got %+v, %v\nwant %+v", got, err, old)
			}
			_, err = tx.UploadGet(ctx, "ns2", "u-old")
			wantErr(t, "upload of another namespace", err, store.ErrNotFound)
			exp, err := tx.UploadsExpired(ctx, at(time.Hour), 10)
			if err != nil || len(exp) != 2 {
				t.Fatalf("expired across namespaces: %+v, %v", exp, err)
			}
			exp, err = tx.UploadsExpired(ctx, at(time.Hour), 1)
			if err != nil || len(exp) != 1 {
				t.Errorf("expired limit 1: %+v, %v", exp, err)
			}
			return nil
		})
		writeTx(t, s, func(tx store.Tx) error { return tx.UploadDelete(ctx, "main", "u-old") })
		err = s.Update(t.Context(), func(tx store.Tx) error { return tx.UploadDelete(ctx, "main", "u-old") })
		wantErr(t, "upload deleted twice", err, store.ErrNotFound)
		readTx(t, s, func(tx store.Tx) error {
			exp, err := tx.UploadsExpired(ctx, at(3*time.Hour), 10)
			if err != nil || len(exp) != 2 {
				t.Errorf("expired after a delete: %+v, %v", exp, err)
			}
			return nil
		})
	})

	t.Run("NamespaceSettings", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		readTx(t, s, func(tx store.Tx) error {
			_, err := tx.NamespaceSettingsGet(ctx, "main")
			wantErr(t, "settings never stored", err, store.ErrNotFound)
			return nil
		})
		first := &tessera.NamespaceSettings{Namespace: "main", RawPolicy: tessera.RawPrivate, UpdatedAt: epoch}
		second := &tessera.NamespaceSettings{Namespace: "main", RawPolicy: tessera.RawNamespace, UpdatedAt: at(time.Hour)}
		writeTx(t, s, func(tx store.Tx) error { return tx.NamespaceSettingsPut(ctx, first) })
		writeTx(t, s, func(tx store.Tx) error { return tx.NamespaceSettingsPut(ctx, second) })
		readTx(t, s, func(tx store.Tx) error {
			got, err := tx.NamespaceSettingsGet(ctx, "main")
			if err != nil || !reflect.DeepEqual(got, second) {
				t.Errorf("settings:\n got %+v, %v\nwant %+v", got, err, second)
			}
			_, err = tx.NamespaceSettingsGet(ctx, "ns2")
			wantErr(t, "settings of another namespace", err, store.ErrNotFound)
			return nil
		})
	})

	// The first settings are stored first-wins; the transaction that lost
	// stays usable.
	t.Run("NamespaceSettingsCreate", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		first := &tessera.NamespaceSettings{Namespace: "main", RawPolicy: tessera.RawNamespace, UpdatedAt: epoch}
		writeTx(t, s, func(tx store.Tx) error { return tx.NamespaceSettingsCreate(ctx, first) })
		writeTx(t, s, func(tx store.Tx) error {
			err := tx.NamespaceSettingsCreate(ctx, &tessera.NamespaceSettings{Namespace: "main", RawPolicy: tessera.RawPrivate, UpdatedAt: at(time.Hour)})
			wantErr(t, "settings created over settings", err, store.ErrConflict)
			got, err := tx.NamespaceSettingsGet(ctx, "main")
			if err != nil || !reflect.DeepEqual(got, first) {
				t.Errorf("settings after a second create:\n got %+v, %v\nwant %+v", got, err, first)
			}
			return err
		})
	})

	t.Run("RolledBackWritesLeaveNothing", func(t *testing.T) {
		ctx := t.Context()
		s := open(t)
		boom := errors.New("boom")
		err := s.Update(t.Context(), func(tx store.Tx) error {
			if err := tx.RecordPut(ctx, recordFixture("main", "b", "k", 1), 0); err != nil {
				return err
			}
			if err := tx.BucketEnsure(ctx, "main", "b", epoch); err != nil {
				return err
			}
			return boom
		})
		wantErr(t, "rolled back", err, boom)
		readTx(t, s, func(tx store.Tx) error {
			_, err := tx.RecordHead(ctx, "main", "b", "k")
			wantErr(t, "head after rollback", err, store.ErrNotFound)
			_, err = tx.BucketGet(ctx, "main", "b")
			wantErr(t, "bucket after rollback", err, store.ErrNotFound)
			return nil
		})
	})
}
