// Command worker is a Tessera worker in its own module, using the Go
// client through a replace directive (see go.mod): it upper-cases the
// "text" of each task's payload on the queue "shout" until SIGTERM or
// Ctrl-C, then drains.
//
//	TESSERA_URL=http://127.0.0.1:8787 TESSERA_KEY=tsk_… go run .
package main

import (
	"context"
	"encoding/json"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/tessera-dev/tessera/client"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c, err := client.New(os.Getenv("TESSERA_URL"), client.WithKey(os.Getenv("TESSERA_KEY")))
	if err != nil {
		log.Fatal(err)
	}
	err = c.Work(ctx, "shout", func(ctx context.Context, job *client.Job) (any, error) {
		var in struct{ Text string }
		if err := json.Unmarshal(job.Task.Payload, &in); err != nil {
			return nil, err
		}
		return map[string]string{"text": strings.ToUpper(in.Text)}, nil
	}, client.WorkOptions{Concurrency: 4})
	if err != nil {
		log.Fatal(err)
	}
}
