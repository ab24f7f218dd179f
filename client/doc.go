// Package client is the Go client of Tessera's HTTP API: one typed method
// per route, taking a context, on one shared request helper.
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
// instead of acting again.
//
// Workers claim with long-poll (Claim, WaitClaim) and hand the lease to a
// Keeper, which heartbeats in the background at a third of the lease,
// reports a requested cancel or a lost lease through its context, and
// stops on Submit or Release.
package client
