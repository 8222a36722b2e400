package pipeline

import (
	"strings"
	"testing"
	"time"

	"github.com/weirproject/weir/runtime"
)

// TestRestartKeys: job.restart reaches the runtime's strategy, overridden
// field by field by Options.Restart (the flags); bad values are refused at
// their file:line:column with what is accepted.
func TestRestartKeys(t *testing.T) {
	spec, err := Parse("p.yaml", []byte("job:\n  restart: {strategy: exponential-backoff, attempts: 5, delay: 100ms, maxDelay: 2s, multiplier: 1.5, resetAfter: never}\n"+goodTail))
	if err != nil {
		t.Fatal(err)
	}
	got := restartStrategy(spec, Options{})
	want := runtime.RestartStrategy{Kind: runtime.RestartExponentialBackoff, Attempts: 5, Delay: 100 * time.Millisecond, MaxDelay: 2 * time.Second, Multiplier: 1.5, ResetAfter: -1}
	if got != want {
		t.Errorf("strategy %+v, want %+v", got, want)
	}
	got = restartStrategy(spec, Options{Restart: RestartSpec{Strategy: "fixed-delay", Attempts: 9}})
	want.Kind, want.Attempts = runtime.RestartFixedDelay, 9
	if got != want {
		t.Errorf("with overrides %+v, want %+v", got, want)
	}
	noFile, _ := Parse("p.yaml", []byte(goodTail))
	if got := restartStrategy(noFile, Options{}); got != (runtime.RestartStrategy{}) {
		t.Errorf("no job.restart: %+v, want none", got)
	}

	for _, c := range []struct{ src, want string }{
		{"  restart: {}\n", `p.yaml:2:12: job.restart: missing key "strategy"`},
		{"  restart: {strategy: sometimes}\n", `p.yaml:2:23: job.restart.strategy: "sometimes": want one of none, fixed-delay, exponential-backoff`},
		{"  restart: {strategy: fixed-delay, attempts: 0}\n", "p.yaml:2:46: job.restart.attempts: 0 is out of range; want an integer from 1 to 1000000"},
		{"  restart: {strategy: fixed-delay, delay: -1s}\n", "p.yaml:2:43: job.restart.delay: -1s: want a duration > 0"},
		{"  restart: {strategy: fixed-delay, delay: 5}\n", `p.yaml:2:43: job.restart.delay: "5" has no unit`},
		{"  restart: {strategy: fixed-delay, maxDelay: 5s}\n", "p.yaml:2:46: job.restart.maxDelay: only with strategy exponential-backoff"},
		{"  restart: {strategy: none, attempts: 2}\n", "p.yaml:2:39: job.restart: strategy none restarts nothing"},
		{"  restart: {strategy: exponential-backoff, multiplier: 0.5}\n", "p.yaml:2:56: job.restart.multiplier: 0.5: want a number from 1 to 100"},
		{"  restart: {strategy: exponential-backoff, multiplier: \"2\"}\n", "p.yaml:2:56: job.restart.multiplier: got a string, want a number from 1 to 100"},
		{"  restart: {strategy: exponential-backoff, resetAfter: always}\n", `p.yaml:2:56: job.restart.resetAfter: "always" is not a duration`},
		{"  restart: {strategy: exponential-backoff, delay: 2s, maxDelay: 1s}\n", "p.yaml:2:3: job.restart: maxDelay 1s is shorter than delay 2s"},
		{"  restart: {strategy: fixed-delay, every: 1s}\n", `p.yaml:2:36: job.restart: unknown key "every"; accepted: attempts, delay, maxDelay, multiplier, resetAfter, strategy`},
		{"  allowNonRestoredState: yes please\n", "p.yaml:2:26: job.allowNonRestoredState: got a string, want true or false"},
	} {
		_, err := Parse("p.yaml", []byte("job:\n"+c.src+goodTail))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q: %v\nwant the first error to start %q", c.src, err, c.want)
		}
	}
}
