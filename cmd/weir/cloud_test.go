//go:build weir_cloud

package main

import (
	"net/url"
	"strings"
	"testing"

	"github.com/weirproject/weir/internal/azuretest"
	"github.com/weirproject/weir/internal/gcstest"
)

// TestRunPipelineOnBuckets: weir (a child process, with -tags weir_cloud)
// runs examples/pipelines/parquet-orders.yaml with WEIR_OUT a gs:// or
// azblob:// URL, so that its checkpoints and its Parquet files go to the
// bucket, configured as a user would: gs through STORAGE_EMULATOR_HOST,
// azblob through AZURE_STORAGE_ACCOUNT/KEY and AZURE_STORAGE_DOMAIN,
// _PROTOCOL and _IS_LOCAL_EMULATOR (no URL parameters). The files are
// published under the partitions and a checkpoint is complete in the
// bucket; run again, weir restores from that checkpoint and writes nothing
// more.
func TestRunPipelineOnBuckets(t *testing.T) {
	for _, b := range []struct {
		kind  string
		start func(t *testing.T) string
		keys  func(t testing.TB, loc string) []string
	}{
		{"gs", func(t *testing.T) string { return gcstest.Start(t, "out") }, gcstest.Keys},
		{"azblob", func(t *testing.T) string {
			u, err := url.Parse(azuretest.Start(t, "out"))
			if err != nil {
				t.Fatal(err)
			}
			// The endpoint from the environment, not the URL's query.
			for k, v := range u.Query() {
				env := map[string]string{"domain": "AZURE_STORAGE_DOMAIN", "protocol": "AZURE_STORAGE_PROTOCOL", "localemu": "AZURE_STORAGE_IS_LOCAL_EMULATOR"}[k]
				if env == "" {
					t.Fatalf("unexpected parameter %s in %s", k, u)
				}
				t.Setenv(env, v[0])
			}
			u.RawQuery = ""
			return u.String()
		}, azuretest.Keys},
	} {
		t.Run(b.kind, func(t *testing.T) {
			out := b.start(t)
			t.Setenv("WEIR_OUT", out)
			stdout, stderr, code := runWeir(t, "run", "../../examples/pipelines/parquet-orders.yaml", "--json")
			if code != 0 {
				t.Fatalf("weir run to %s: exit %d\n%s\n%s", out, code, stdout, stderr)
			}
			if !strings.Contains(stdout, `"sink":200`) {
				t.Fatalf("weir run to %s: summary without the 200 orders in the sink:\n%s", out, stdout)
			}
			var parts, manifests int
			for _, k := range b.keys(t, out) {
				switch {
				case strings.HasPrefix(k, "parquet-orders/orders/dt=") && strings.HasSuffix(k, ".parquet"):
					parts++
				case strings.HasPrefix(k, "parquet-orders/orders/.inprogress/"):
					t.Errorf("in-progress object %s left after the run", k)
				case strings.HasPrefix(k, "parquet-orders/checkpoints/") && strings.HasSuffix(k, "/_metadata"):
					manifests++
				}
			}
			if parts == 0 || manifests == 0 {
				t.Fatalf("in %s: %d part files, %d checkpoint manifests; want some of each", out, parts, manifests)
			}
			stdout, stderr, code = runWeir(t, "run", "../../examples/pipelines/parquet-orders.yaml", "--json")
			if code != 0 || !strings.Contains(stdout, `"sink":0`) {
				t.Fatalf("second run from %s's checkpoint: exit %d, want nothing more in the sink:\n%s\n%s", out, code, stdout, stderr)
			}
		})
	}
}
