package wal

import (
	"testing"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) agent.ActionStateStore { return mustOpen(t, t.TempDir(), all) })
}
