//go:build weir_azure || weir_cloud

package main

import _ "github.com/weirproject/weir/checkpoint/azure" // see drivers.go

func init() { linked["weir_azure"] = true }
