package kafka

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when goroutines outlive them. The
// benchmarks' shared broker (bench_test.go) is closed before the check.
func TestMain(m *testing.M) { goleak.VerifyTestMain(closeBenchBroker{m}) }

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
