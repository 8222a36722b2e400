package cluster_test

import (
	"testing"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/cluster"
)

// TaskName knows only the environments of tasks being built or run; the
// tasks' own names are checked through package pipeline's group-mode
// tests, whose per-task transactional ids depend on them.
func TestTaskNameOutsideATask(t *testing.T) {
	if name, ok := cluster.TaskName(weir.NewEnvironment(weir.Config{})); ok || name != "" {
		t.Fatalf("TaskName of a plain environment: %q, %v; want \"\", false", name, ok)
	}
}
