package storetest

import (
	"testing"

	"github.com/weirproject/weir/agent"
)

func TestMemoryStore(t *testing.T) {
	Run(t, func(*testing.T) agent.ActionStateStore {
		s, err := agent.NewMemoryStore().Factory()(nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
