//go:build !unix

package broker

import (
	"errors"
	"os"
)

// errLocked means another process holds the lock.
var errLocked = errors.New("locked by another process")

// lockFile does nothing on systems without flock: two brokers on one data
// directory are not detected there.
func lockFile(*os.File) error { return nil }
