package weirtest

import (
	"testing"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/watermark"
)

// Start runs the job until stop: a paused script keeps it running, its
// first record arrives (Eventually sees it), and stop ends the job by
// cancellation without failing the test, twice without harm.
func TestStartAndEventually(t *testing.T) {
	g := NewGate()
	env := weir.NewEnvironment(noPeriodic)
	src := Script([][]Step[string]{{Rec(0, "a", 10), PauseOn[string](g), Rec(0, "b", 20)}})
	obs := Observe(weir.FromSource(env, "src", src, watermark.NoWatermarks[string]()))
	job, stop := Start(t, env)
	Eventually(t, "the first record", func() bool { return len(obs.Records()) == 1 })
	select {
	case <-job.Done():
		t.Fatal("job ended while its source was paused")
	default:
	}
	stop()
	stop()
	select {
	case <-job.Done():
	default:
		t.Fatal("job still running after stop")
	}
}
