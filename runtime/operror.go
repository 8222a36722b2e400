package runtime

import "fmt"

// OperatorError is the error of an operator subtask's failure: the error a
// job ends with when one of its operators fails (I6), and the cause of a
// checkpoint that one of them could not snapshot. Match it with errors.As
// to learn which operator failed, in which subtask and doing what; Err is
// the operator's own error, which errors.Is and errors.As reach through it.
//
//	var oe *runtime.OperatorError
//	if errors.As(err, &oe) && oe.Phase == runtime.PhaseOpen { ... }
//
// Its text names the operator and subtask, as it always has, for logs:
// operator "parse" (subtask 0 of 2): open: <Err>.
type OperatorError struct {
	// Operator is the failing operator's name (chained operators are
	// named each for itself, not for the head of their chain).
	Operator string
	// Subtask is the failing subtask, of Parallelism.
	Subtask, Parallelism int
	// Phase is what the operator was doing.
	Phase Phase
	// Checkpoint is the checkpoint's id for PhaseNotifyComplete and
	// PhaseCheckpoint, else 0.
	Checkpoint int64
	// Err is the cause: the operator's error, or a *PanicError.
	Err error
}

// Phase is what an operator subtask was doing when it failed.
type Phase string

// The phases of an OperatorError.
const (
	// PhaseOpen: Open returned the error.
	PhaseOpen Phase = "open"
	// PhaseProcess: a record, watermark, idle status, timer or mailbox
	// letter, or Context.Fail.
	PhaseProcess Phase = "process"
	// PhaseRead: the source's Reader.Poll.
	PhaseRead Phase = "read"
	// PhaseEndInput: EndInput.
	PhaseEndInput Phase = "end of input"
	// PhaseClose: Close.
	PhaseClose Phase = "close"
	// PhasePanic: any of the operator's methods panicked; Err is a
	// *PanicError.
	PhasePanic Phase = "panic"
	// PhaseSnapshot, PhaseSnapshotSplits and PhaseSnapshotAsync: the
	// synchronous part of a snapshot (Snapshotter), a source's split
	// positions (SplitSnapshotter), the asynchronous part
	// (SnapshotWriter.Async). They abort the checkpoint, not the job.
	PhaseSnapshot       Phase = "snapshot"
	PhaseSnapshotSplits Phase = "snapshot splits"
	PhaseSnapshotAsync  Phase = "snapshot (asynchronous part)"
	// PhaseNotifyComplete: CheckpointListener.NotifyCheckpointComplete.
	PhaseNotifyComplete Phase = "checkpoint complete"
	// PhaseCheckpoint: the coordinator could not persist a checkpoint in
	// a way that must stop every task (checkpoint.ErrFenced); Operator is
	// the head of each task's chain.
	PhaseCheckpoint Phase = "checkpoint"
)

func (e *OperatorError) Error() string {
	who := fmt.Sprintf("operator %q (subtask %d of %d)", e.Operator, e.Subtask, e.Parallelism)
	switch e.Phase {
	case PhaseProcess:
		return fmt.Sprintf("%s: %v", who, e.Err)
	case PhasePanic:
		return fmt.Sprintf("%s panicked: %v", who, e.Err)
	case PhaseNotifyComplete:
		return fmt.Sprintf("%s: checkpoint %d complete: %v", who, e.Checkpoint, e.Err)
	case PhaseCheckpoint:
		return fmt.Sprintf("%s: checkpoint %d: %v", who, e.Checkpoint, e.Err)
	}
	return fmt.Sprintf("%s: %s: %v", who, e.Phase, e.Err)
}

// Unwrap returns Err.
func (e *OperatorError) Unwrap() error { return e.Err }

// PanicError is the Err of an OperatorError of PhasePanic: what the
// operator panicked with, and the stack of its subtask's goroutine then.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("%v\n%s", e.Value, e.Stack) }

// Unwrap returns Value when it is an error (a runtime.Error, an error
// passed to panic), so errors.Is and errors.As reach it; else nil.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// opError returns the error of operator op of t failing in phase with err.
func (t *task) opError(op string, phase Phase, err error) *OperatorError {
	return &OperatorError{Operator: op, Subtask: t.subtask, Parallelism: t.parallelism, Phase: phase, Err: err}
}

// fail records the first failure of the task (an operator's, in
// PhaseProcess); the loop checks it between batches and stops (I9).
func (t *task) fail(op string, err error) { t.failWith(t.opError(op, PhaseProcess, err)) }

// failWith records e as the task's failure unless it has one already.
func (t *task) failWith(e *OperatorError) {
	if t.err == nil {
		t.err = e
	}
}
