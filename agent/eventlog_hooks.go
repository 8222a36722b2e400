package agent

import (
	"encoding/json"
	"maps"
	"strings"
)

// flushLog flushes the event log's buffering listeners; an error is
// logged, not fatal (the log is an observation of the job).
func (o *operator[K, IN, OUT]) flushLog() {
	if err := o.elog.flush(); err != nil {
		o.logger.Warn("agent: writing the event log failed", "err", err)
	}
}

// logApplied logs what applying c commits: the short-term memory writes
// and the outputs (on the subtask goroutine, before c is recycled).
func (o *operator[K, IN, OUT]) logApplied(c *completion[K, IN]) {
	rc := c.rc
	if len(rc.short.writes) > 0 {
		e := rc.entry(LogMemory)
		w := maps.Clone(rc.short.writes)
		maps.DeleteFunc(w, func(k string, _ json.RawMessage) bool { return strings.HasPrefix(k, ttlPrefix) })
		e.Name, e.Data, e.Replayed = "short-term", w, c.replayed
		o.elog.emit(e)
	}
	for i := range rc.sent {
		if rc.sent[i].Type == TypeOutput {
			e := rc.entry(LogOutput)
			e.Data, e.Replayed = rc.sent[i].Value, c.replayed
			o.elog.emit(e)
		}
	}
}
