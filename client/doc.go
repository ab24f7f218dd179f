// Package client is the Go client of Tessera's HTTP API: one typed method
// per route, taking a context, on one shared request helper, and Work, a
// worker loop on top of them.
//
// # Using it from another module
//
// The module (github.com/tessera-dev/tessera) is not published, so
// `go get github.com/tessera-dev/tessera/client` fails. Until it is, point
// your module at a checkout of the repository with a replace directive:
//
//	require github.com/tessera-dev/tessera v0.0.0
//	replace github.com/tessera-dev/tessera => ../tessera
//
// or put both modules in a workspace (`go work init . ../tessera`). The
// package imports nothing but the standard library, so nothing else is
// fetched. examples/worker in the repository is such a module; a test
// builds it with its replace directive and no module proxy.
//
// # Calls and errors
//
// It speaks only the public HTTP API and defines its own wire types, so
// anything it does can be done with curl. Failures come back as one typed
// error, *Error, carrying the HTTP status, the API's error code, message
// and details; read it with errors.As or the helpers IsLeaseLost,
// IsNotFound, IsConflict and friends.
//
// Requests that the server refused without acting (429, 503) and requests
// that never reached it (a refused connection) are retried with backoff,
// honouring Retry-After. A request that may have reached the server is
// retried only when repeating it cannot act twice: reads, heartbeats, and
// the writes that carry an Idempotency-Key. Enqueue, submit, record writes
// and blob commits always carry one (generated unless the caller gives one),
// and a retry sends the same key, so the server answers the first response
// instead of acting again. Stats counts the 429s met and the retries made;
// with WithLogger each retried 429 is logged at debug level. A steady
// stream of 429s on claims means the key's workers claim faster than the
// server's per-key admission (by default 200 claims a second, burst 400,
// 64 in flight — long-polls included — see `tessera serve -h`) allows.
//
// # Workers
//
// Work is the whole worker loop: it claims with long-poll, keeps each
// lease alive while a Handler runs (Concurrency at a time), submits what
// the handler returns, and on its context's end drains — stops claiming,
// gives running handlers WorkOptions.Drain to finish, then cancels them
// and releases their tasks. A worker is a handler and one call:
//
//	err := c.Work(ctx, "summaries", func(ctx context.Context, job *client.Job) (any, error) {
//		return summarize(ctx, job.Task.Payload)
//	}, client.WorkOptions{Concurrency: 4})
//
// A handler that needs a person's answer — a choice, an approval, a
// sign-in — returns job.Gate(specs...) rather than wait: its task is
// parked on those gates without holding the worker or using an attempt,
// and once they are answered (AnswerGate, the console, an MCP client) the
// run that claims it again finds the answers in job.GateAnswers.
//
// Underneath, workers claim with Claim or WaitClaim (which ends when its
// context does, mid-long-poll too) and hand the lease to a Keeper, which
// heartbeats in the background at a third of the lease, reports a
// requested cancel or a lost lease through its context, and stops on
// Submit or Release. An empty claim says when its queue has never had a
// task in the namespace (Empty.QueueUnknown: a misspelt name, most often),
// and what ready tasks require that the claim's capabilities lack
// (Empty.UncoveredRequires); WaitClaim and Work warn of each once through
// the logger.
//
// # Traces
//
// A task carries the W3C trace context it was enqueued in
// (EnqueueRequest.Trace, or WithTrace on the enqueue's context; Task.Trace
// on every read and claim). Work gives each handler's context its task's
// trace, so the run's heartbeats, records and submit — and the handler's
// own calls with that context — send it as traceparent, and a server that
// exports spans puts them in the producer's trace.
package client
