// Package fsync makes files and directory entries durable: when a call
// returns nil, what it wrote is on the device, so that a crash of the
// machine (not only of the process) keeps it.
//
//	F1. Dir syncs a directory, making the creations, renames and removals
//	    of its entries durable.
//	F2. WriteFile replaces a file whole or not at all: the data goes to a
//	    temporary file beside it, which is synced, renamed over the file,
//	    and the directory synced. A crash leaves the old file or the new
//	    one, and at most a stray temporary file (path + ".tmp-fsync").
package fsync

import (
	"os"
	"path/filepath"
)

// Dir syncs the directory dir (F1).
func Dir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// WriteFile writes data to the file at path with permissions perm (F2).
func WriteFile(path string, data []byte, perm os.FileMode) error {
	tmp := path + ".tmp-fsync"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return Dir(filepath.Dir(path))
}
