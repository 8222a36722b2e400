package cluster

import (
	"fmt"

	"github.com/weirproject/weir/checkpoint"
)

// A group savepoint (Config.RestoreFrom) is laid out as a checkpoint base:
// RestoreFrom/tasks/<task>/chk-N for every task of the job. Stopping every
// process of a job (SIGTERM, ctx cancelled) leaves one: each task is
// checkpointed as it is handed over, the last process's at its exit, so
// the job's checkpoint base (or a copy of it, taken while no process runs)
// holds a consistent cut per task. A task restores its part only while it
// has no checkpoint of its own under CheckpointBase: once it has one, the
// job has gone on from the savepoint and a restart must not go back.

// savepointPart returns the newest complete checkpoint of task in the
// group savepoint cfg.RestoreFrom; a task whose part is missing is an
// error (a task started empty while the others restore would lose its
// state and its records in flight).
func savepointPart(cfg Config, task string) (string, error) {
	dir := checkpoint.Join(checkpoint.Join(cfg.RestoreFrom, "tasks"), task)
	d, _, err := checkpoint.Latest(dir)
	if err != nil {
		return "", fmt.Errorf("cluster: task %s: no complete checkpoint of it in the group savepoint %s (want %s/chk-N): %w", task, cfg.RestoreFrom, dir, err)
	}
	return d, nil
}
