// Package state is weir's in-memory keyed state backend: value, list and map
// state scoped to the current key, and value and list state scoped to the
// current key and a namespace (for windows), all partitioned by key group as
// in Flink's HeapKeyedStateBackend.
//
// The same API also runs on Pebble (Open with Options{Kind: BackendPebble};
// pebble.go states its invariants and key layout): the guarantees below
// hold for both backends, except that I2 and I6 describe the memory layout,
// and with Pebble codecs run on every access (I8), values are copies (a
// pointer held in state is not the stored value), and registration does
// not decode natively restored entries. Native snapshots for incremental
// checkpoints are in pebble_native.go; the write-back cache that keeps a
// key's reads and writes off Pebble between flushes is in pebble_cache.go.
// A Pebble backend also stores the timers of its operator
// (Backend.TimerStore, for timer.NewServiceInStore) after each key group's
// state entries (pebble_timers.go), so native checkpoints carry them.
//
// # How the two kinds are built
//
// Backend is one concrete struct for both kinds, so that SetCurrentKey and
// the state handles' per-record methods are inlined and make no interface
// call in memory. What differs is behind interfaces chosen when the
// backend opens or a state registers, and each kind's code is in its own
// files (TestBackendKindsSeparate checks that the files other than
// pebble.go and pebble_*.go name nothing of Pebble):
//
//   - Backend.store (keyedStore) holds the backend-level operations:
//     memBackend (mem_backend.go) or pebbleBackend (pebble.go): attaching
//     a new state, loading restored entries at registration, ClearKeyGroup,
//     snapshots and restores, Freeze (whose Frozen reads a frozenView),
//     Close.
//   - Each state handle (ValueState, ...) keeps its memory storage inline
//     and an ext field of the per-record operations, nil in memory: the
//     per-record methods start with one nil check of it. On Pebble, ext is
//     a wrapper of the handle (pebble_states.go) that holds all of the
//     state's Pebble logic.
//   - The backend's table of a state (Backend.Table; counting, clearing
//     and iterating a key group, snapshots) is the handle in memory and its
//     Pebble wrapper on Pebble.
//
// A Backend belongs to one operator subtask. The runtime calls SetCurrentKey
// before handing a record or a timer to user code; every state registered on
// the backend then reads and writes that key's entries.
//
// # What it guarantees
//
//	I1. Scoping. A state access touches only the current key's entry (and, for
//	    namespaced state, only the given namespace's entry). Distinct keys,
//	    namespaces and state names never share entries.
//	I2. Key groups. Each state keeps a slice indexed by keyGroup - Range().Start
//	    of lazily created Go maps (open-addressing tables with inline entries
//	    for namespaced state), so a key's entry lives in the slot of the key
//	    group given to SetCurrentKey, and one key group can be iterated
//	    (ForEachValue and the other functions of keygroups.go,
//	    Table.ForEachAny) or dropped (Backend.ClearKeyGroup,
//	    Table.ClearKeyGroup) without touching the others. These key-group
//	    operations are not methods of the state handles, whose methods touch
//	    the current key only.
//	I3. Routing. SetCurrentKey panics if the key group is outside the
//	    backend's range; accessing state before any SetCurrentKey panics.
//	    After SetCurrentKeyLazy the same check runs when the key group is
//	    first computed (by a state access that needs it, or
//	    CurrentKeyGroup); an access served without it (a value state's
//	    index, I6) touches only an entry that was stored under a checked
//	    key group.
//	I4. No garbage entries. Clearing a key's value or list, updating a list to
//	    empty, or removing the last entry of a key's map removes the key from
//	    its key group's map, so Table.NumKeys counts only live entries. Namespaced
//	    state also counts, iterates and snapshots only live (key, namespace)
//	    pairs, but when a key's last namespace is cleared it keeps the key's
//	    emptied slot for the key's next namespace (a key's windows open and
//	    close all the time). A sweep bounds these empty slots: one still empty
//	    at two consecutive sweeps of its key group is deleted, and a key group
//	    is swept after max(64, n) clears, n its live pairs at the previous
//	    sweep, so it holds at most 2*max(64, n over its last two sweeps) of
//	    them.
//	I5. Registration. Registering a name twice with the same kind and types
//	    returns the same state object; with another kind or types it returns an
//	    error naming both (the Must* helpers panic with it instead).
//	I6. Cost. Reading or updating an existing entry is a slice index plus one
//	    map operation (two for map state) and does not allocate. For
//	    namespaced state the table is keyed by the key alone, and a key's
//	    namespaces are scanned (a few, newest first) or, for keys with many,
//	    indexed. Value state and namespaced state remember the current key's
//	    entry, so a read followed by a write of the same key (Value then
//	    Update, Get then Add) costs one map operation. Value state in
//	    memory also keeps an index of its entries by key over all key
//	    groups (value.go, X1-X4), and reads an existing key there, without
//	    its key group: after SetCurrentKeyLazy such a read never computes
//	    the key group. The index is an open-addressing table, for every
//	    key type, whose slot holds a copy of the value (vindex.go: one
//	    probe, no load through the entry's pointer; for a string key and
//	    an int64 value 33 bytes a slot, 44-88 bytes a key at its load of
//	    3/8-3/4).
//	I7. List ownership. Slices returned by Get and passed to ForEach are the
//	    state's own storage: valid until the next modification of that list,
//	    never to be modified or retained by the caller. Update copies its
//	    argument.
//	I8. Snapshots. SnapshotKeyGroup(kg) writes every entry of key group kg, of
//	    every state, in the format below, and does not modify the backend: a
//	    blob restored later holds exactly the entries of snapshot time. Codecs
//	    (Codec, DefaultCodec, the *WithCodec constructors, SetKeyCodec) run
//	    only then, never on the per-record path.
//	I9. Restore. RestoreKeyGroup(kg, blob) accepts a blob of key group kg from
//	    any backend at any parallelism, before or after the states register:
//	    entries of a state not registered yet stay encoded until it registers
//	    (then decoded with its codecs) and are carried unchanged into
//	    snapshots taken meanwhile. A restore either succeeds or changes
//	    nothing, and returns an error, never panics, on a malformed blob.
//	I10. Copy-on-write snapshots. Freeze returns a Frozen view of every state
//	    as it is at that instant, in time proportional to states x key
//	    groups (no entry is copied), and the subtask goes on.
//	    Frozen.SnapshotKeyGroup may run on another goroutine while the
//	    subtask writes; it returns exactly the bytes SnapshotKeyGroup would
//	    have returned at Freeze time (up to map order). Each key group is
//	    serialized once: by the view, or by the subtask just before its
//	    first write to a key group the view has not reached (so a write can
//	    pause for one key group's serialization, never more); only a key
//	    group the view is reading at that instant is copied instead. See
//	    cow.go for the invariants. A value that refers to memory (a slice,
//	    a map) and was read with Value may be shared with a view, so it is
//	    edited in place before its Update only when
//	    ValueState.SnapshotMayRead reports false (no live view reads the
//	    state; always the case between checkpoints).
//
// # What it does not do
//
//   - It is not safe for concurrent use: one subtask goroutine owns it
//     (a Frozen view is the one exception, see I10).
//   - It does not choose key groups: the caller passes the key group of the
//     key (keygroup.KeyGroupOf) and the backend trusts it, or passes the
//     function that computes it (SetKeyGroupFunc) for SetCurrentKeyLazy.
//   - It does not decide when to checkpoint or where blobs go: the runtime
//     calls SnapshotKeyGroup for each key group of its range at a barrier
//     and stores the blobs with an index, and calls RestoreKeyGroup for each
//     key group of the new range. Blobs carry no checksum; the checkpoint
//     storage guards their integrity.
//   - Iteration order within a key group is unspecified.
//   - It has no TTL and no size accounting.
//   - It does not record the Go types of states in snapshots, only their
//     kind: restoring with other types works when their codecs read the old
//     bytes, and otherwise fails when the state registers.
//
// # Snapshot format
//
// A key-group snapshot ("blob") is also the savepoint format: it does not
// depend on the backend (a Pebble backend writes the same bytes) and is
// versioned. docs/state-format.md describes it with examples. Notation:
// uvarint is encoding/binary's unsigned varint; field is a uvarint length
// followed by that many bytes written by a Codec.
//
//	blob    = version:uvarint keyGroup:uvarint numStates:uvarint state*
//	state   = name:field kind:uvarint section:field
//	section = numEntries:uvarint entry*
//
// version is SnapshotVersion (1); readers reject other versions with an
// error wrapping ErrSnapshotVersion. keyGroup is the key group the blob
// belongs to (a restore into another key group fails). States appear in
// strictly increasing byte order of name, and only states with entries in
// the key group appear. kind is the Kind constant (1 value, 2 list, 3 map,
// 4 namespaced value, 5 namespaced list); these numbers are frozen. The
// entries of a section, in no particular order, are by kind:
//
//	value            key:field value:field
//	list             key:field n:uvarint item:field*n             (n >= 1)
//	map              key:field n:uvarint (userKey:field value:field)*n  (n >= 1)
//	namespaced value key:field namespace:field value:field
//	namespaced list  key:field namespace:field n:uvarint item:field*n  (n >= 1)
//
// key bytes are written by the backend's key codec (SetKeyCodec), the others
// by the state's codecs. A key group with no entries has the empty blob:
// SnapshotKeyGroup returns nil, and RestoreKeyGroup accepts nil or empty as
// no entries. Malformed blobs (truncated, overlong, counts and lengths that
// do not add up, unsorted names, unknown kinds, empty lists or maps,
// trailing bytes) give errors wrapping ErrCorruptSnapshot.
//
// Package timer writes the timers of a key group in a sibling format (see
// timer.SnapshotVersion) with the same framing and codecs.
package state
