// Package retry is weir's one back-off between retries: the model and
// embedding clients, the MCP client, package asyncio, the PostgreSQL and
// HTTP sinks, the Kafka connector, the schema-registry client and the
// job's restart strategy take their waits from it, so that every retry in
// weir waits the same way and on the clock it is given.
//
// A Policy describes the waits: capped exponential back-off (Initial,
// multiplied by Multiplier after each wait, never more than Max) with
// jitter drawn from an injectable source (Rand). A Backoff is one run of
// retries under a Policy: Next returns the wait before the next attempt,
// longer when a server asked for it (Retry-After). Sleep waits on a
// clock.Clock, so a test or a simulation with a manual clock retries
// without sleeping, and ends early when the context is done. RetryAfter
// reads the wait a server asked for from an HTTP reply.
//
// Retrying itself (which errors are transient, how many attempts, how the
// last error is reported) stays with each caller: those answers differ
// from one protocol to another, the waits do not.
//
// # Invariants
//
//	R1. Growth: the nominal wait before the n-th retry (n from 1) is
//	    min(Initial × Multiplier^(n-1), Max), computed one step at a time
//	    and saturating at Max (never overflowing).
//	R2. Jitter: the wait Next draws lies in [d − ⌊d × Jitter⌋, d], d the
//	    nominal wait, uniformly by Rand; with Jitter 0 it is d.
//	R3. Cap: with Max > 0 no wait Next returns exceeds Max, a server's
//	    Retry-After included.
//	R4. Retry-After: Next(after) is at least min(after, Max): a server's
//	    wait is never shortened except by the cap.
//	R5. Clock: Sleep(ctx, c, d) returns nil only once d has elapsed on c
//	    (on a manual clock: once the test has advanced it by d), and
//	    ctx.Err() as soon as ctx is done, whichever comes first; a done
//	    context wins even over a wait of 0. When it returns, its timer is
//	    stopped: nothing stays armed on c.
//	R6. Determinism: with a deterministic Rand, the waits depend only on
//	    the Policy, the sequence of calls and their Retry-After values.
package retry
