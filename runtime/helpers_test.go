package runtime_test

// Helpers of this package's end-to-end tests (package runtime_test): jobs
// built with package weir's typed API and run by the runtime.

import (
	"context"
	"testing"
	"time"

	"github.com/weirproject/weir/internal/jobtest"
	"github.com/weirproject/weir/internal/testenv"
)

func testCtx(t *testing.T) context.Context { return testenv.Context(t, 30*time.Second) }

// The shared helpers of internal/jobtest under the names these tests use.
type (
	event    = jobtest.Event
	countKey = jobtest.CountKey
)

const noTicks = jobtest.NoTicks

var (
	start    = jobtest.Start
	strategy = jobtest.Strategy
)

func must(t *testing.T, err error) { t.Helper(); jobtest.Must(t, err) }
