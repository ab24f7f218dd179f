package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"slices"
	"testing"

	"github.com/tessera-dev/tessera/client"
	"github.com/tessera-dev/tessera/internal/testserver"
)

// TestMain gives the examples a real server, reached the way a program
// would find one: TESSERA_URL and TESSERA_KEY.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tessera-client-example")
	if err != nil {
		log.Fatal(err)
	}
	srv, stop, err := testserver.Open(dir, testserver.Options{})
	if err != nil {
		log.Fatal(err)
	}
	os.Setenv("TESSERA_URL", srv.URL)
	os.Setenv("TESSERA_KEY", testserver.AdminKey)
	code := m.Run()
	stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

// A producer enqueues a task; a worker claims it, keeps the lease alive
// while it works, and submits the result.
func Example() {
	ctx := context.Background()
	c, err := client.New(os.Getenv("TESSERA_URL"), client.WithKey(os.Getenv("TESSERA_KEY")))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.Enqueue(ctx, client.EnqueueRequest{Queue: "example", Title: "summarize r-17", Payload: map[string]string{"doc": "r-17"}}); err != nil {
		log.Fatal(err)
	}

	claim, err := c.WaitClaim(ctx, client.ClaimRequest{Queue: "example", LeaseSeconds: 60})
	if err != nil {
		log.Fatal(err)
	}
	lease := c.Keep(ctx, claim, client.KeepOptions{})
	// ... work under lease.Context(): it ends if the task is canceled ...
	task, err := lease.Submit(ctx, client.SubmitRequest{Outcome: client.OutcomeSucceeded, Result: map[string]string{"summary": "short"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(task.Title, task.State, string(task.Result))
	// Output: summarize r-17 succeeded {"summary":"short"}
}

// Errors are one type; the helpers name the cases a program acts on.
func ExampleIsNotFound() {
	c, err := client.New(os.Getenv("TESSERA_URL"), client.WithKey(os.Getenv("TESSERA_KEY")))
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.GetTask(context.Background(), "01JNOSUCHTASK0000000000000")
	var e *client.Error
	if errors.As(err, &e) {
		fmt.Println(e.Status, e.Code, client.IsNotFound(err))
	}
	// Output: 404 not_found true
}

// Records are versioned: if_version makes a write conditional.
func ExampleClient_PutRecord() {
	ctx := context.Background()
	c, err := client.New(os.Getenv("TESSERA_URL"), client.WithKey(os.Getenv("TESSERA_KEY")))
	if err != nil {
		log.Fatal(err)
	}
	v1, err := c.PutRecord(ctx, "notes", "example", client.PutRecordRequest{Value: "first"})
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.PutRecord(ctx, "notes", "example", client.PutRecordRequest{Value: "second", IfVersion: &v1.Version})
	fmt.Println(v1.Version, err)
	_, err = c.PutRecord(ctx, "notes", "example", client.PutRecordRequest{Value: "stale", IfVersion: &v1.Version})
	fmt.Println(client.IsVersionConflict(err))
	// Output:
	// 1 <nil>
	// true
}

// A blob is stored in three calls; PutBlob makes them.
func ExampleClient_PutBlob() {
	ctx := context.Background()
	c, err := client.New(os.Getenv("TESSERA_URL"), client.WithKey(os.Getenv("TESSERA_KEY")))
	if err != nil {
		log.Fatal(err)
	}
	ref, err := c.PutBlob(ctx, []byte("hello"), "text/plain", "")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ref)
	// Output: sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824
}

// A worker: Work claims tasks of the queue, keeps their leases while the
// handler runs, and submits what it returns. MaxTasks makes this example
// stop after two; a real worker runs until its context ends (SIGTERM),
// then drains.
func ExampleClient_Work() {
	ctx := context.Background()
	c, err := client.New(os.Getenv("TESSERA_URL"), client.WithKey(os.Getenv("TESSERA_KEY")))
	if err != nil {
		log.Fatal(err)
	}
	for _, doc := range []string{"r-18", "r-19"} {
		if _, err := c.Enqueue(ctx, client.EnqueueRequest{Queue: "summaries", Title: "summarize " + doc, Payload: doc}); err != nil {
			log.Fatal(err)
		}
	}

	err = c.Work(ctx, "summaries", func(ctx context.Context, job *client.Job) (any, error) {
		var doc string
		if err := json.Unmarshal(job.Task.Payload, &doc); err != nil {
			return nil, err // submitted as failed, retried while attempts are left
		}
		return map[string]string{"summary": "short " + doc}, nil
	}, client.WorkOptions{Concurrency: 2, MaxTasks: 2})
	fmt.Println(err)

	page, err := c.ListTasks(ctx, client.TaskFilter{Queue: "summaries"})
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range slices.Backward(page.Tasks) {
		fmt.Println(t.Title, t.State, string(t.Result))
	}
	// Output:
	// <nil>
	// summarize r-18 succeeded {"summary":"short r-18"}
	// summarize r-19 succeeded {"summary":"short r-19"}
}
