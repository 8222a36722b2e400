package runtime

import (
	"sync"
	"time"

	"github.com/weirproject/weir/checkpoint"
)

// CheckpointStats describes one checkpoint or savepoint of a running job.
type CheckpointStats struct {
	ID int64 `json:"id"`
	// Kind is "checkpoint" or "savepoint".
	Kind string `json:"kind"`
	// Status is "in progress", "completed" or "failed".
	Status string `json:"status"`
	// StartedMs is when the coordinator triggered it, in milliseconds of
	// the job's clock.
	StartedMs int64 `json:"startedMs"`
	// DurationMs is how long it took from trigger to completion or
	// failure (so far, while in progress).
	DurationMs int64 `json:"durationMs"`
	// Bytes is the size of the snapshot's blobs (completed ones).
	Bytes int64 `json:"bytes,omitempty"`
	// SyncPauseMicros is the longest synchronous pause of a task for it:
	// the time the task stopped processing to snapshot its operators.
	SyncPauseMicros int64 `json:"syncPauseMicros"`
	// Acknowledged and Tasks: how many of the job's tasks have
	// acknowledged it, of how many.
	Acknowledged int `json:"acknowledged"`
	Tasks        int `json:"tasks"`
	// Cause says why it failed.
	Cause string `json:"cause,omitempty"`
}

// Checkpoint statuses (CheckpointStats.Status).
const (
	CheckpointInProgress = "in progress"
	CheckpointCompleted  = "completed"
	CheckpointFailed     = "failed"
)

// checkpointHistory keeps the stats of a job's latest checkpoints. The
// coordinator goroutine writes it (a few times per checkpoint); Job
// readers copy it under mu.
type checkpointHistory struct {
	mu struct {
		sync.Mutex
		list []CheckpointStats // oldest first, at most maxCheckpointHistory
	}
}

// maxCheckpointHistory is how many checkpoints Job.Checkpoints reports.
const maxCheckpointHistory = 50

func (h *checkpointHistory) started(p *pendingCP, kind checkpoint.Kind, tasks int) {
	k := "checkpoint"
	if kind == checkpoint.KindSavepoint {
		k = "savepoint"
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.mu.list) == maxCheckpointHistory {
		h.mu.list = append(h.mu.list[:0], h.mu.list[1:]...)
	}
	h.mu.list = append(h.mu.list, CheckpointStats{ID: p.id, Kind: k, Status: CheckpointInProgress,
		StartedMs: p.started.UnixMilli(), Tasks: tasks})
}

// update changes the entry of id, if it is still kept.
func (h *checkpointHistory) update(id int64, f func(*CheckpointStats)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := len(h.mu.list) - 1; i >= 0; i-- {
		if h.mu.list[i].ID == id {
			f(&h.mu.list[i])
			return
		}
	}
}

func (h *checkpointHistory) acknowledged(p *pendingCP) {
	acked := 0
	h.update(p.id, func(s *CheckpointStats) {
		acked = s.Tasks - p.left
		s.Acknowledged = acked
		s.SyncPauseMicros = p.maxSync.Microseconds()
	})
}

func (h *checkpointHistory) completed(p *pendingCP, now time.Time, bytes int64) {
	h.update(p.id, func(s *CheckpointStats) {
		s.Status = CheckpointCompleted
		s.DurationMs = now.Sub(p.started).Milliseconds()
		s.Bytes = bytes
		s.SyncPauseMicros = p.maxSync.Microseconds()
		s.Acknowledged = s.Tasks
	})
}

func (h *checkpointHistory) failed(p *pendingCP, now time.Time, err error) {
	h.update(p.id, func(s *CheckpointStats) {
		s.Status = CheckpointFailed
		s.DurationMs = now.Sub(p.started).Milliseconds()
		s.SyncPauseMicros = p.maxSync.Microseconds()
		s.Cause = err.Error()
	})
}

// list copies the history; in-progress entries get their duration so far.
func (h *checkpointHistory) list(now time.Time) []CheckpointStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := append([]CheckpointStats(nil), h.mu.list...)
	for i := range out {
		if out[i].Status == CheckpointInProgress {
			out[i].DurationMs = max(now.UnixMilli()-out[i].StartedMs, 0)
		}
	}
	return out
}

// Checkpoints returns the job's latest checkpoints and savepoints (at most
// 50), oldest first, with the one in progress, if any, last.
func (j *Job) Checkpoints() []CheckpointStats {
	b := j.current()
	return b.coord.history.list(b.cfg.Clock.Now())
}
