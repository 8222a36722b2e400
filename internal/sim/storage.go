package sim

import (
	"fmt"
	"sync"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// storageInjector is the errorfs.Injector of one StorageFault: it fails
// the f.At-th operation of kind f.Op that the checkpoint storage performs
// in the attempt, with EIO or ENOSPC wrapped in ErrInjected, and lets
// every other operation through.
type storageInjector struct {
	f    *StorageFault
	mu   sync.Mutex
	seen int
}

func (i *storageInjector) String() string { return i.f.String() }

func (i *storageInjector) MaybeError(op errorfs.Op) error {
	if !matches(i.f.Op, op.Kind) {
		return nil
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	i.seen++
	if i.seen != i.f.At {
		return nil
	}
	i.f.Struck = true
	errno := syscall.EIO
	if i.f.Errno == "ENOSPC" {
		errno = syscall.ENOSPC
	}
	return fmt.Errorf("%w: storage %s %d of the attempt (%s): %w", ErrInjected, i.f.Op, i.seen, op.Path, errno)
}

func matches(op StorageOp, k errorfs.OpKind) bool {
	switch op {
	case StorageSync:
		return k == errorfs.OpFileSync || k == errorfs.OpFileSyncData || k == errorfs.OpFileSyncTo
	case StorageWrite:
		return k == errorfs.OpFileWrite || k == errorfs.OpFileWriteAt
	case StorageCreate:
		return k == errorfs.OpCreate || k == errorfs.OpMkdirAll
	case StorageLink:
		return k == errorfs.OpLink || k == errorfs.OpRename
	}
	return false
}
