//go:build weir_gcs || weir_cloud

package main

import _ "github.com/weirproject/weir/checkpoint/gcs" // see drivers.go

func init() { linked["weir_gcs"] = true }
