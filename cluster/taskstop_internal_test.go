package cluster

import (
	"context"
	"log/slog"
	"testing"
	"time"
)

// A task's TaskStopped says SessionLost when the process lost its session
// (no hand-over checkpoint, M3) or when its hand-over ended after the
// rebalance time-out (the group may have given the task away meanwhile,
// C2), and not for a hand-over within it or a stop of the process.
func TestTaskStoppedSaysWhenTheSessionWasLost(t *testing.T) {
	for _, c := range []struct {
		name       string
		checkpoint bool
		revoked    time.Time
		want       bool
	}{
		{"revoke within the rebalance time-out", true, time.Now(), false},
		{"revoke past the rebalance time-out", true, time.Now().Add(-time.Hour), true},
		{"lost session", false, time.Time{}, true},
		{"process stops", true, time.Time{}, false},
	} {
		var got []TaskEvent
		m := newMember(context.Background(), Config{RebalanceTimeout: time.Minute, RevokeCheckpointTimeout: time.Second,
			Logger: slog.New(slog.DiscardHandler), OnTask: func(ev TaskEvent) { got = append(got, ev) }}, nil)
		_, cancel := context.WithCancel(context.Background())
		tr := &taskRunner{spec: taskSpec{id: "keyed-0"}, m: m, cancel: cancel, done: make(chan struct{})}
		close(tr.done)
		tr.stop(c.checkpoint, c.revoked)
		if len(got) != 1 || got[0].Kind != TaskStopped || got[0].SessionLost != c.want {
			t.Errorf("%s: events %+v, want one TaskStopped with SessionLost %v", c.name, got, c.want)
		}
	}
}
