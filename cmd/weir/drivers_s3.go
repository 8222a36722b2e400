//go:build weir_s3 || weir_cloud

package main

import _ "github.com/weirproject/weir/checkpoint/s3" // see drivers.go

func init() { linked["weir_s3"] = true }
