package main

import (
	"strings"
	"testing"

	"github.com/weirproject/weir/checkpoint"
)

// TestDriversByBuildTag: a location of an object store is accepted exactly
// when its driver is linked in by a build tag (drivers_*.go), and refused
// otherwise in one line naming the go install command with the tag. CI
// runs it without tags and with -tags weir_cloud.
func TestDriversByBuildTag(t *testing.T) {
	for _, d := range []struct{ loc, tag string }{
		{"s3://bucket/chk", "weir_s3"}, {"gs://bucket/chk", "weir_gcs"}, {"azblob://container/chk", "weir_azure"},
	} {
		err := checkpoint.CheckLocation(d.loc)
		if linked[d.tag] {
			if err != nil {
				t.Errorf("%s with -tags %s: %v", d.loc, d.tag, err)
			}
			continue
		}
		want := "go install -tags " + d.tag + " github.com/weirproject/weir/cmd/weir@latest"
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s without -tags %s: %v; want one line naming %q", d.loc, d.tag, err, want)
		}
	}
}
