// Package weir is the typed API for building and running weir jobs:
// event-time-correct, exactly-once stream pipelines.
//
// A job starts from an Environment. Sources make Streams; functions such as
// Map, Filter, FlatMap, Union and KeyBy make new Streams from old ones;
// Process runs a KeyedProcessFunction with keyed state and timers on a
// KeyedStream; sinks end the job. Execute runs it:
//
//	env := weir.NewEnvironment(weir.Config{Parallelism: 2})
//	orders := weir.FromSlice(env, "orders", data, strategy)
//	totals := weir.Process(weir.KeyBy(orders, Order.Customer), "totals", newTotals)
//	out := weir.Collect(totals)
//	err := env.Execute(ctx)
//
// Windows live in package window, asynchronous I/O in package asyncio,
// connectors under connector/.
//
// # Guarantees
//
//	I1. Records of one key reach the same keyed subtask, chosen by Flink's
//	    key-group assignment (package keygroup), so state and timers of a key
//	    live in one place.
//	I2. An operator's watermark is the minimum over its active inputs and
//	    never decreases; records an operator emits before forwarding a
//	    watermark precede it downstream (package runtime, I1 and I3).
//	I3. Event-time timers fire in ascending timestamp order when the
//	    watermark passes them, before the watermark is forwarded.
//	I4. Functions, state and timers of one subtask run on one goroutine.
//
// The runtime semantics are in package runtime; watermark generation and
// combination in package watermark.
package weir
