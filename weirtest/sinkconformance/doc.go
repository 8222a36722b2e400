// Package sinkconformance is the conformance suite for exactly-once
// (two-phase) sinks: it runs a checkpointed job that ends in the sink under
// test, fails it at random points, restores it from its latest checkpoint
// each time until it completes, and checks that the committed output
// equals that of a run without failures: every record exactly once.
//
// A sink passes it by giving a name and three functions (Sink): how to
// end a stream in it, how to make an empty destination (a directory, a
// topic, a table), and how to read what is committed there. The suite is
// run by the sinks' own tests: connector/file (here, file_test.go),
// connector/jsonl's file per subtask (here, jsonl_test.go: no two phases,
// but files cut back to their checkpointed length on restore),
// connector/kafka, connector/postgres (both modes) and connector/parquet
// (a directory and s3://).
//
// Run has two modes, each a subtest:
//
//   - crash: the job runs in the test's process and fails at a random
//     record (an operator error); the sink is left as a crash would leave
//     it (no Close-time commit) and a new job restores it.
//   - kill9: the job runs in a child process (the test binary started
//     again, which MaybeChild in the package's TestMain turns into the
//     job) that the test kills with SIGKILL at random points, then starts
//     again from the latest checkpoint until one child completes. Nothing
//     of the sink's in-memory state survives, and a kill can land in any
//     phase: writing, pre-committing at a barrier, committing after a
//     checkpoint completed, restoring.
//
// What it checks:
//
//	S1. A failure-free run commits each of the job's records exactly once.
//	S2. Runs failed in process at Failures random records, each restored
//	    from the latest completed checkpoint, commit the same multiset of
//	    records as the failure-free run (nothing lost, nothing twice).
//	S3. The same holds for runs killed with SIGKILL Kills times at random
//	    points (a record count then a random delay), each restarted from
//	    the latest completed checkpoint.
//
// The random points come from a seed printed with every failure; the
// environment variable WEIR_CONFORMANCE_SEED replays it. Each mode's trial
// count has a small default (a few seconds per sink) and an environment
// variable for long runs: WEIR_CONFORMANCE_TRIALS (crash) and
// WEIR_CONFORMANCE_KILL_TRIALS (kill9). The kill9 mode is skipped under
// -short.
//
// What the child shares with the test is the test binary and the
// destination string: Attach and Committed must depend on dest alone
// (carry broker addresses or a connection string in it), and servers the
// sink writes to (a broker, PostgreSQL, an S3 server) live in the test's
// process, which outlives the children.
package sinkconformance
