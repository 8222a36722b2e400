package checkpoint

import (
	"testing"

	"go.uber.org/goleak"
)

// AfterTests run once the package's tests have, before the leak check:
// cloud_test.go stops the Azurite its tests share (azuretest.Stop), whose
// clients' connections end with it.
var AfterTests []func()

type runThenAfterTests struct{ m *testing.M }

func (r runThenAfterTests) Run() int {
	code := r.m.Run()
	for _, f := range AfterTests {
		f()
	}
	return code
}

// TestMain fails the package's tests when goroutines outlive them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(runThenAfterTests{m},
		// Started at init by go.opencensus.io, which the GCS test server
		// (fake-gcs-server, through internal/gcstest) links.
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}
