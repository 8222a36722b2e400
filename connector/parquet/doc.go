// Package parquet is an exactly-once sink of Parquet files on a local
// directory or an object store (s3://, gs://, azblob:// through
// gocloud.dev/blob), built on weir's two-phase commit in the manner of
// Flink's FileSink: each subtask writes part files, rolled by size and at
// every checkpoint, under a hidden in-progress name; the checkpoint barrier
// finishes them (PreCommit: footer written, object durable); the completed
// checkpoint publishes them under their final names (Commit).
//
// Layout under the sink's root (Options.Path):
//
//	PARTITION/part-SSSS-RUN-TTTTTT-NNNN.parquet    committed part files
//	.inprogress/part-SSSS-RUN-TTTTTT-NNNN.parquet.inprogress
//
// PARTITION is the record's event time formatted by Options.Partition
// (dt=2026-12-04/hour=10 by default, UTC); SSSS the writing subtask, RUN
// the sink instance's run id (its start time and a random part: unique per
// subtask instance, so a restarted job never reuses a name), TTTTTT the
// transaction (one per checkpoint interval) and NNNN the part within it.
//
// Invariants:
//
//	P1. A committed file is complete (footer included) and holds exactly the
//	    records of one part of one pre-committed transaction; readers never
//	    see a partial file: in-progress objects are under .inprogress/ and
//	    end in .inprogress, which no *.parquet glob matches.
//	P2. Nothing is committed before the checkpoint covering it completes,
//	    except at the end of bounded input.
//	P3. Commit is idempotent: a part whose final object exists and whose
//	    in-progress object is gone is committed; publishing again writes the
//	    same bytes (a copy of the same object) under the same name.
//	P4. After any number of crashes and restores, the committed files hold
//	    every record of the restored job's input exactly once: pre-committed
//	    transactions of the restored checkpoint are committed (P3), and
//	    in-progress files no restored checkpoint needs are deleted by
//	    Recover (see sink.Recover for why each deletion is safe).
//	P5. A part file never exceeds Options.RollSize by more than one batch
//	    of records and the footer.
//
// What it does not do: compact small files, or clean up in-progress files
// of a subtask index that no longer exists after the job was rescaled down
// and then restored from a checkpoint taken before the rescale (they stay
// under .inprogress/; delete them when the job is stopped).
package parquet
