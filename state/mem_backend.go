package state

// memBackend is the keyedStore of the memory backend (NewBackend): the
// states hold their entries themselves, in per-key-group Go maps (and
// open-addressing tables for namespaced state), and the backend holds the
// restored entries of states not registered yet (pending).
type memBackend[K comparable] struct{ b *Backend[K] }

func (m memBackend[K]) kind() string { return BackendMemory }

func (m memBackend[K]) attach(s table) table { return s }

func (m memBackend[K]) load(name string, kind Kind, typ string, t table) error {
	return loadPending(m.b, name, kind, typ, t)
}

// clearKeyGroup drops key group kg of every state and the restored entries
// of kg waiting for states not registered yet.
func (m memBackend[K]) clearKeyGroup(kg int) {
	b := m.b
	b.checkKeyGroup(kg)
	for _, t := range b.tables {
		t.clearKeyGroup(kg)
	}
	for name, p := range b.pending {
		delete(p.groups, kg)
		if len(p.groups) == 0 {
			delete(b.pending, name)
		}
	}
}

func (m memBackend[K]) snapshot(kg int) ([]byte, error) {
	b := m.b
	if !b.rng.Contains(kg) {
		return b.AppendSnapshotKeyGroup(nil, kg) // the error
	}
	// Size the blob from the bytes per entry of the previous snapshots, so
	// that a large key group is not copied over and over as append grows it.
	entries := 0
	for _, t := range b.tables {
		entries += t.numKeysInKeyGroup(kg)
	}
	var dst []byte
	if entries > 0 {
		per := b.snapBytesPerEntry
		if per == 0 {
			per = 16
		}
		dst = make([]byte, 0, 64+entries*per+entries*per/8)
	}
	dst, err := b.AppendSnapshotKeyGroup(dst, kg)
	if err == nil && entries > 0 {
		b.snapBytesPerEntry = max(1, len(dst)/entries)
	}
	if len(dst) == 0 {
		dst = nil
	}
	return dst, err
}

func (m memBackend[K]) appendSnapshot(dst []byte, kg int) ([]byte, error) {
	b := m.b
	return appendKeyGroup(dst, kg, b.rng, b.tables, b.pending)
}

func (m memBackend[K]) restore(kg int, blob []byte) error { return m.b.restoreMem(kg, blob) }

func (m memBackend[K]) freeze() *Frozen[K] { return m.b.freezeMem() }

// close does nothing: the memory backend holds no files.
func (m memBackend[K]) close() error { return nil }
