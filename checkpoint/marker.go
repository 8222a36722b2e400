package checkpoint

import (
	"errors"
	"os"
)

// PutMarker writes name, an empty object, under loc (a directory or a URL,
// as every location of this package), atomically and durably: a reader sees
// it whole or not at all. Programs that share a checkpoint location use
// markers to say that something is over (a task that finished, in package
// cluster); snapshots never are markers.
func (st Storage) PutMarker(loc, name string) error {
	store, key, err := st.open(loc)
	if err != nil {
		return err
	}
	return store.Publish(keyJoin(key, name), nil)
}

// HasMarker reports whether PutMarker wrote name under loc.
func (st Storage) HasMarker(loc, name string) (bool, error) {
	store, key, err := st.open(loc)
	if err != nil {
		return false, err
	}
	if _, err := store.Size(keyJoin(key, name)); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}
