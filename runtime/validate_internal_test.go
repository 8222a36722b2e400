package runtime

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weirproject/weir/checkpoint"
)

func TestConfigValidate(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		cfg  Config
		want []string // substrings of the error; none: valid
	}{
		{"zero", Config{}, nil},
		{"full", Config{Parallelism: 4, MaxParallelism: 128, BufferSize: 10, BuffersPerChannel: 2,
			AutoWatermarkInterval: -1, BufferTimeout: -1,
			Checkpoint:   CheckpointConfig{Interval: time.Second, Dir: filepath.Join(dir, "chk"), Mode: AtLeastOnce},
			StateBackend: StateBackendConfig{Kind: "pebble", Dir: filepath.Join(dir, "pebble")}}, nil},
		{"negative parallelism", Config{Parallelism: -2}, []string{"Config.Parallelism -2", "from 1 to 32768"}},
		{"parallelism above max", Config{Parallelism: 200, MaxParallelism: 128}, []string{"Config.Parallelism 200 exceeds Config.MaxParallelism 128"}},
		{"max parallelism too large", Config{MaxParallelism: 40000}, []string{"Config.MaxParallelism 40000", "from 1 to 32768"}},
		{"negative max parallelism", Config{MaxParallelism: -1}, []string{"Config.MaxParallelism -1"}},
		{"negative buffer size", Config{BufferSize: -1}, []string{"Config.BufferSize -1", "positive"}},
		{"negative buffers", Config{BuffersPerChannel: -3}, []string{"Config.BuffersPerChannel -3"}},
		{"negative interval", Config{Checkpoint: CheckpointConfig{Interval: -time.Second}}, []string{"CheckpointConfig.Interval -1s"}},
		{"negative timeout", Config{Checkpoint: CheckpointConfig{Timeout: -1}}, []string{"CheckpointConfig.Timeout"}},
		{"negative pause", Config{Checkpoint: CheckpointConfig{MinPause: -1}}, []string{"CheckpointConfig.MinPause"}},
		{"negative retain", Config{Checkpoint: CheckpointConfig{Retain: -1}}, []string{"CheckpointConfig.Retain -1"}},
		{"unknown mode", Config{Checkpoint: CheckpointConfig{Mode: 7}}, []string{"CheckpointConfig.Mode 7"}},
		{"interval without dir", Config{Checkpoint: CheckpointConfig{Interval: time.Second}}, []string{"CheckpointConfig.Dir is empty"}},
		{"unwritable dir", Config{Checkpoint: CheckpointConfig{Interval: time.Second, Dir: "/proc/x"}}, []string{`CheckpointConfig.Dir "/proc/x" is not a writable directory`}},
		{"dir is a file", Config{Checkpoint: CheckpointConfig{Dir: file}}, []string{"CheckpointConfig.Dir", "not a writable directory"}},
		{"unknown backend", Config{StateBackend: StateBackendConfig{Kind: "rocksdb"}}, []string{`StateBackendConfig.Kind "rocksdb"`, `"memory"`, `"pebble"`}},
		{"unwritable pebble dir", Config{StateBackend: StateBackendConfig{Kind: "pebble", Dir: file}}, []string{"StateBackendConfig.Dir"}},
		{"several", Config{Parallelism: -1, BufferSize: -1}, []string{"Config.Parallelism -1", "Config.BufferSize -1"}},
		{"slice", Config{MaxParallelism: 128, Slice: Slice{Index: 3, Count: 4}}, nil},
		{"slice without max parallelism", Config{Slice: Slice{Index: 0, Count: 4}}, []string{"Config.Slice 0 of 4 with MaxParallelism 0", "set MaxParallelism"}},
		{"slice index out of range", Config{MaxParallelism: 128, Slice: Slice{Index: 4, Count: 4}}, []string{"Config.Slice.Index 4", "from 0 to 3"}},
		{"more slices than key groups", Config{MaxParallelism: 8, Slice: Slice{Count: 9}}, []string{"Config.Slice.Count 9 exceeds Config.MaxParallelism 8"}},
		{"negative slice count", Config{MaxParallelism: 8, Slice: Slice{Count: -1}}, []string{"Config.Slice.Count -1"}},
		{"slice index without count", Config{Slice: Slice{Index: 2}}, []string{"Config.Slice.Index 2 with Slice.Count 0"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := ValidateConfig(c.cfg)
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("valid config rejected: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	// A local directory on a file system of the caller's is not probed on
	// the operating system's, where it need not exist.
	onMem := filepath.Join(dir, "on-mem")
	if err := ValidateConfig(Config{Checkpoint: CheckpointConfig{Interval: time.Second, Dir: onMem,
		Storage: checkpoint.Storage{FS: vfs.NewMem()}}}); err != nil {
		t.Fatalf("checkpoints on an in-memory file system: %v", err)
	}
	if _, err := os.Stat(onMem); !os.IsNotExist(err) {
		t.Fatalf("the in-memory file system's checkpoint directory was probed on the real disk (stat: %v)", err)
	}
	// The probe file is removed.
	if ents, _ := os.ReadDir(filepath.Join(dir, "chk")); len(ents) != 0 {
		t.Fatalf("checkpoint directory holds %d entries after the check", len(ents))
	}
}
