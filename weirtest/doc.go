// Package weirtest helps test weir jobs: a scripted source whose subtasks
// replay a fixed sequence of records, watermarks, idleness changes and
// pauses, and an Observer sink that records, per subtask, the exact
// interleaving of records, watermarks and idle/active statuses an operator
// received, and checks the event-time invariants on it.
//
// # Scripted sources
//
// Script returns a runtime.Source whose subtask i plays perSubtask[i]: a
// list of Steps. A Step emits a record of a split (with its timestamp), sets
// a split's watermark, marks a split idle or active, finishes a split, or
// pauses the subtask until the test releases a Gate (or closes a channel).
// When the script of a subtask is over, the subtask ends, and with it its
// output ends with watermark.Max, like any bounded source.
//
// Use a script with watermark.NoWatermarks, so the watermarks are exactly
// the scripted ones and records keep their scripted timestamps:
//
//	g := weirtest.NewGate()
//	src := weirtest.Script([][]weirtest.Step[string]{{
//		weirtest.Rec(0, "a", 10),
//		weirtest.WM[string](0, 10),
//		weirtest.PauseOn[string](g), // the subtask waits here
//		weirtest.Rec(0, "b", 20),
//	}})
//	s := weir.FromSource(env, "src", src, watermark.NoWatermarks[string]())
//
// Every split named in a subtask's script is announced (AddSplit) at the
// subtask's first poll, before any step runs, so a split whose first step
// comes late still holds the subtask's watermark from the start, as a Kafka
// partition assigned at start-up would.
//
// Scripted records carry their timestamp as the source timestamp; a strategy
// with a Timestamp function would replace it, and a step with TS
// runtime.NoTimestamp goes to the source's dead letters unless the strategy
// assigns one.
//
// A Pause step makes the reader return runtime.Wait until it is released;
// meanwhile the subtask keeps serving its timers and mailbox, and every
// other subtask runs on. That is how a test holds one source back (a slow
// partition, an idle one) and then lets it go. Gate.WaitArrived tells the
// test that a subtask has reached the pause, so the test can sequence its
// checks without sleeping. An arrival means the steps before the pause have
// run in the reader; records may still sit in a partly filled batch for a
// moment, so to know that an operator has processed them, wait on an
// Observer. A marker record emitted just before the pause is convenient:
// whatever the subtask emitted before it on the same channel was processed
// first.
//
// # Observers
//
// Observe(s) ends s in a sink operator that records everything each of its
// subtasks receives, in order. An Observation can be read while the job runs
// (WaitUntil and the Wait helpers block until a condition holds, without
// polling) and after it ended. Check fails a test if some subtask received
// watermarks that did not strictly increase, or a record whose timestamp was
// not above a watermark it had already received (a late record); CheckFinal
// also wants every subtask to end at watermark.Max, and StatusViolations
// reports idle/active statuses that do not alternate or a watermark received
// while idle. Since a Stream may be consumed several times, observe every
// stage of a pipeline by fanning out to an Observer after each operator.
//
// The observer consumes s like any operator added with weir.Transform: with
// a forward edge (chained, one observer subtask per producer subtask) when
// the producer's parallelism is the job default, and with a rebalance
// otherwise (each observer subtask then combines the watermarks of all
// producer subtasks, as any operator behind an exchange does). weir chains
// an edge between two single subtasks whatever its partitioning, so there
// the observer sees its producer's output as is.
//
// # Running jobs in tests
//
// Start starts a job and returns a stop function that cancels it and checks
// it ended by that cancellation (it also runs at the test's cleanup);
// Eventually waits for a condition a running job makes true, failing the
// test only if it never does within a generous bound (it asserts no
// duration).
package weirtest
