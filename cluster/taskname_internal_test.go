package cluster

import (
	"log/slog"
	"testing"
)

// The environment Run builds for a task carries the task's name
// (weir.Config.Task), which TaskName reads back: the same name in every
// process, as the tasks' transactional ids need.
func TestTaskEnvCarriesTheTaskName(t *testing.T) {
	cfg := Config{CheckpointBase: t.TempDir(), MaxParallelism: 8, KeyedTasks: 2, Logger: slog.New(slog.DiscardHandler)}
	for _, task := range []string{sourceTaskID(3), keyedTaskID(1)} {
		env, restored, err := taskEnv(cfg, task)
		if err != nil {
			t.Fatal(err)
		}
		if restored != "" {
			t.Fatalf("task %s restored %q from an empty checkpoint base", task, restored)
		}
		if name, ok := TaskName(env); !ok || name != task {
			t.Fatalf("TaskName of task %s's environment: %q, %v", task, name, ok)
		}
	}
}
