package agent

import (
	"github.com/weirproject/weir/clock"
)

// mark is a watermark or an idle-status change held by the segmented
// queue.
type mark struct {
	kind int8 // markWatermark, markIdle, markActive
	ts   int64
}

const (
	markWatermark int8 = iota
	markIdle
	markActive
)

// release forwards every held mark whose inputs have all finished, oldest
// first (G5).
func (o *operator[K, IN, OUT]) release() {
	for {
		m, ok := o.q.PopReady()
		if !ok {
			break
		}
		switch m.kind {
		case markWatermark:
			o.Out.EmitWatermark(m.ts)
		case markIdle:
			o.Out.EmitIdle(true)
		case markActive:
			o.Out.EmitIdle(false)
		}
	}
	if o.q.Held() > 0 && !o.tickArmed && !o.closed {
		o.tickArmed = true
		o.Ctx.RegisterProcessingTimer(clock.NowMillis(o.Ctx.Clock)+tickMillis, o.tick)
	}
	o.maybeEndAnswers()
}

const tickMillis = 1000

// tick refreshes the age gauge while marks are held and warns, once per
// held watermark, when the oldest has waited longer than StallWarning.
func (o *operator[K, IN, OUT]) tick(now int64) {
	o.tickArmed = false
	if o.closed {
		return
	}
	o.gauges()
	if o.q.Held() == 0 {
		return
	}
	if o.opts.StallWarning > 0 {
		m, _, _ := o.q.Oldest()
		if age := o.q.OldestAge(); age >= o.opts.StallWarning.Milliseconds() && (m.ts != o.warnedAt || m.kind != markWatermark) {
			o.warnedAt = m.ts
			s := o.status()
			o.logger.Warn("agent: a watermark is held back by unfinished inputs",
				"watermark", s.OldestHeldWatermark, "ageMs", s.OldestHeldAgeMs, "heldWatermarks", s.HeldWatermarks,
				"keys", s.OldestHeldBy, "keyCount", s.OldestHeldByCount)
		}
	}
	o.tickArmed = true
	o.Ctx.RegisterProcessingTimer(now+tickMillis, o.tick)
}
