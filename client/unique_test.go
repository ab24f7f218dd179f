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
