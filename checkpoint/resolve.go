package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"sort"
)

// Resolve returns the snapshot a restore from loc reads: loc itself when it
// holds a complete snapshot (a checkpoint's chk-N or a savepoint), else the
// newest complete checkpoint directly under loc (loc is then a checkpoint
// base such as CheckpointConfig.Dir, the parent of chk-N). Anything else is
// an error matching ErrNoSnapshot that says what was looked for.
func (st Storage) Resolve(loc string) (string, error) {
	store, key, err := st.open(loc)
	if err != nil {
		return "", err
	}
	if _, err := store.Size(keyJoin(key, MetadataFile)); err == nil {
		return loc, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("checkpoint: read %s: %w", Join(loc, MetadataFile), err)
	}
	ids, err := listComplete(store, key)
	if err != nil {
		return "", err
	}
	if len(ids) == 0 {
		return "", fmt.Errorf("%w in %s: want a savepoint or checkpoint directory (one with %s) or the directory holding checkpoints (chk-N with %s)",
			ErrNoSnapshot, loc, MetadataFile, MetadataFile)
	}
	return Dir(loc, ids[len(ids)-1]), nil
}

// Resolve is Storage.Resolve with the zero Storage.
func Resolve(loc string) (string, error) { return Storage{}.Resolve(loc) }

// Complete returns the locations of the complete snapshots directly under
// dir, whatever their names (savepoints kept together, such as a job's
// DIR/savepoints), in name order. A directory that does not exist holds
// none.
func (st Storage) Complete(dir string) ([]string, error) {
	store, key, err := st.open(dir)
	if err != nil {
		return nil, err
	}
	entries, err := store.List(key)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir {
			continue
		}
		if _, err := store.Size(keyJoin(key, e.Name, MetadataFile)); err == nil {
			out = append(out, Join(dir, e.Name))
		}
	}
	sort.Strings(out)
	return out, nil
}
