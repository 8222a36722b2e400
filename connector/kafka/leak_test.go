package kafka

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/weirproject/weir/weirtest/sinkconformance"
)

// TestMain fails the package's tests when goroutines outlive them. The
// benchmarks' shared broker (bench_test.go) is closed before the check.
// A child process of the conformance suite's kill9 mode runs its job
// instead.
func TestMain(m *testing.M) {
	sinkconformance.MaybeChild(conformanceSink)
	goleak.VerifyTestMain(closeBenchBroker{m})
}

// closeBenchBroker runs the tests and benchmarks, then closes the broker
// the benchmarks started, if any.
type closeBenchBroker struct{ m *testing.M }

func (c closeBenchBroker) Run() int {
	code := c.m.Run()
	if bench.b != nil {
		bench.b.Close()
	}
	return code
}
