//go:build unix

package broker

import (
	"errors"
	"os"
	"syscall"
)

// errLocked means another process holds the lock.
var errLocked = errors.New("locked by another process")

// lockFile takes an exclusive advisory lock on f without waiting. The
// kernel releases it when the process dies, even by kill -9.
func lockFile(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return errLocked
	}
	return err
}
