// Package checkpoint stores and loads snapshots of a job's state:
// checkpoints (taken periodically by the runtime, kept under a base
// location with retention) and savepoints (taken on request, kept wherever
// the user says). A location is a local directory (a path or file:///path)
// or a prefix in an object-store bucket (s3://, gs://, azblob://, through
// gocloud.dev/blob, each accepted when its driver package is linked in:
// checkpoint/s3, checkpoint/gcs, checkpoint/azure); both hold one documented, versioned format (see
// docs/checkpoints.md), object for file, so a snapshot copied from one to
// the other reads the same:
//
//	BASE/chk-000000000042/          one snapshot
//	    _metadata                   the manifest (JSON), written last
//	    op-0003-sub-0001-<token>.bin  state of one operator subtask: blobs
//	BASE/_fence/                    the epochs of the base's owners (Fence)
//
// A snapshot is complete exactly when its _metadata exists: data objects
// are written first, each whole or not at all, then the manifest (the
// commit point, Store.Publish). In a directory each file is written to a
// temporary name, synced and renamed into place; the directory is synced
// before the manifest is linked (so a manifest that survives a crash names
// only files whose entries survive too) and, with its parent, after; a
// directory created whose entry could not be synced is removed again (so
// a later write creates and syncs it rather than trusting it); in a bucket each write
// is one atomic object (there is no rename). A crash at any point leaves
// either a complete snapshot or one without _metadata, which readers
// ignore and retention removes. The manifest is created only if absent
// (ExclusivePublisher: link(2) in a directory, a conditional write in a
// bucket), and data files carry a token of the write that made them, so
// two writers of one snapshot never mix: one completes it, the other
// gets ErrExists. Fence extends that to a writer that lost its claim on
// the base (a clustered task's old owner): see its design. Retention deletes a manifest before the
// data it references, so that an interrupted deletion never leaves a
// complete-looking snapshot with objects missing.
//
// Invariants:
//
//	I1. Every blob the manifest references has the length and CRC-32C the
//	    manifest records; a mismatch is an error naming the file, never a
//	    silent partial restore.
//	I2. Keyed state is stored per key group, with an index, so a restoring
//	    subtask reads only the key groups it owns (restore at another
//	    parallelism re-slices key-group ranges).
//	I3. The max parallelism (number of key groups) is recorded; restoring
//	    with a different one is refused.
//	I4. Operator state is matched to operators by uid.
//	I5. A snapshot completes once, by one writer (ExclusivePublisher); with
//	    a Fence, a writer superseded by a newer claim completes none, and
//	    readers ignore a manifest the claim voided (see Fence).
//	I6. What a restore acts on survives a crash: Persist syncs a
//	    snapshot's directory and its name before a job restores from it
//	    (a snapshot whose write failed at its last fsync can be complete
//	    and readable, yet a crash could lose it after the job had
//	    committed its transactions). Write removes the manifest of such a
//	    snapshot again (unless fenced), so one reported failed is not
//	    counted complete by List, Latest or Retain, but the removal can
//	    fail or be lost in a crash.
//
// Version 2 adds native keyed state (NativeState, native.go): a Pebble
// checkpoint whose immutable SSTs live in BASE/shared/<owner>/ and are
// shared by the checkpoints that reference them (incremental
// checkpoints); Retain collects the ones no retained checkpoint
// references. Snapshots without native state are written as version 1.
package checkpoint
