package scaleout

import (
	"testing"
	"time"

	"github.com/weirproject/weir/cluster"
)

// measureRestart reads the restart runs' figures from task events: moves
// at the other workers (not finishes, not restarts after a failure, not
// the stops of finished tasks at the end), the tasks back in the restarted
// worker, the pause and the time tasks ran nowhere.
func TestMeasureRestart(t *testing.T) {
	ev := func(ms int64, member, task string, kind cluster.TaskEventKind) cluster.TaskEvent {
		return cluster.TaskEvent{Time: ms, Member: member, Task: task, Kind: kind}
	}
	at, restartAt := time.UnixMilli(1000), time.UnixMilli(2000)
	const S, P, F, X = cluster.TaskStarted, cluster.TaskStopped, cluster.TaskFinished, cluster.TaskFailed
	for _, c := range []struct {
		name   string
		killed bool
		evs    []cluster.TaskEvent
		want   restartMeasure
	}{
		{"dynamic, SIGTERM: t1 handed to a and back", false, []cluster.TaskEvent{
			ev(10, "v", "t1", S), ev(20, "a", "t2", S),
			ev(1100, "v", "t1", P), ev(1300, "a", "t1", S), // away: 200 ms down
			ev(1500, "a", "t2", X), ev(1600, "a", "t2", S), // a failure and restart in a: not a move (100 ms down)
			ev(2200, "a", "t1", P), ev(2500, "v", "t1", S), // back: 300 ms down
			ev(3000, "a", "t2", F), ev(3100, "v", "t1", F), ev(3200, "a", "t2", P), ev(3300, "v", "t1", P), // the end
		}, restartMeasure{back: 1, moved: 2, pause: 300 * time.Millisecond, down: 600 * time.Millisecond}},
		{"static, SIGKILL: t1 waits for v", true, []cluster.TaskEvent{
			ev(10, "v", "t1", S), ev(20, "a", "t2", S),
			ev(2400, "v", "t1", S),
			ev(3000, "a", "t2", F), ev(3100, "v", "t1", F), ev(3200, "a", "t2", P),
		}, restartMeasure{back: 1, moved: 0, pause: 1400 * time.Millisecond, down: 1400 * time.Millisecond}},
		{"t1 never runs again", true, []cluster.TaskEvent{ev(10, "v", "t1", S)}, restartMeasure{pause: -1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := measureRestart(c.evs, "v", []string{"t1"}, at, restartAt, c.killed)
			if got != c.want {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}
