package client_test

import (
	"context"
	"testing"

	"github.com/tessera-dev/tessera/client"
	"github.com/tessera-dev/tessera/internal/testserver"
)

// An enqueue with a UniqueKey answers the unfinished task that holds the
// key, Deduplicated, until it finishes.
func TestEnqueueUniqueKey(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	ctx := context.Background()
	c := newClient(t, srv.URL, testserver.AdminKey)
	req := client.EnqueueRequest{Queue: "sync", Title: "sync account 7", UniqueKey: "acct-7"}
	first := ok(c.Enqueue(ctx, req))
	again := ok(c.Enqueue(ctx, req))
	if first.Deduplicated || first.UniqueKey != "acct-7" || again.ID != first.ID || !again.Deduplicated {
		t.Fatalf("first %s (deduplicated %v, key %q), again %s (deduplicated %v); want one task, the second answer deduplicated",
			first.ID, first.Deduplicated, first.UniqueKey, again.ID, again.Deduplicated)
	}
	if _, err := c.CancelTask(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	if next := ok(c.Enqueue(ctx, req)); next.ID == first.ID || next.Deduplicated {
		t.Errorf("after the holder was canceled the key answered %s (deduplicated %v); want a new task", next.ID, next.Deduplicated)
	}
}

// An enqueue with a Debounce answers the task its key points at while
// that task is unclaimed, Debounced, with the new title.
func TestEnqueueDebounce(t *testing.T) {
	srv := testserver.Start(t, testserver.Options{})
	ctx := context.Background()
	c := newClient(t, srv.URL, testserver.AdminKey)
	req := client.EnqueueRequest{Queue: "index", Title: "reindex v1", Debounce: &client.Debounce{Key: "doc-9", Seconds: 60}}
	first := ok(c.Enqueue(ctx, req))
	req.Title = "reindex v2"
	again := ok(c.Enqueue(ctx, req))
	if first.Debounced || first.DebounceKey != "doc-9" || again.ID != first.ID || !again.Debounced || again.Title != "reindex v2" {
		t.Fatalf("first %s (debounced %v, key %q), again %s (debounced %v, %q); want one task, the second answer debounced and retitled",
			first.ID, first.Debounced, first.DebounceKey, again.ID, again.Debounced, again.Title)
	}
}
