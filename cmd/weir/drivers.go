package main

// The object-store drivers of checkpoint and savepoint locations are
// linked in by build tags, one file each (drivers_*.go), as Flink's
// filesystem plugins: weir_s3 (s3://), weir_gcs (gs://), weir_azure
// (azblob://), or weir_cloud for all three. Without them weir keeps
// snapshots in local directories only, and builds in a fraction of the
// time (BENCHMARKS.md, "First build"); a location whose driver is not
// linked in is refused in one line naming the go install command that
// adds it:
//
//	go install -tags weir_s3 github.com/weirproject/weir/cmd/weir@latest

// linked holds the build tags of the drivers linked in (for the tests).
var linked = map[string]bool{}
