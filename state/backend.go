package state

import (
	"fmt"
	"reflect"
	"slices"
	"sync/atomic"

	"github.com/weirproject/weir/keygroup"
)

// Backend is the in-memory keyed state of one operator subtask. It owns a
// key-group range, the current key (set by the runtime before each record or
// timer) and the states registered by name. It is not safe for concurrent
// use: it belongs to one subtask goroutine.
type Backend[K comparable] struct {
	rng    keygroup.Range
	key    K
	kg     int
	slot   int // kg - rng.Start; valid when hasKey and not lazy
	hasKey bool
	// lazy says that the current key was set by SetCurrentKeyLazy and its
	// key group is not computed yet: resolve computes it (with kgOf) when a
	// state or the caller first needs it.
	lazy bool
	kgOf func(K) int
	// epoch changes with every SetCurrentKey; states use it to know that a
	// cached entry still belongs to the current key. It is never 0, so a
	// state's cache epoch of 0 means no cached entry.
	epoch  uint64
	tables map[string]table
	// kc encodes keys in snapshots (SetKeyCodec).
	kc Codec[K]
	// pending holds restored entries of states not registered yet, by name
	// (see RestoreKeyGroup).
	pending map[string]*pendingState
	// snapBytesPerEntry is the size per entry of the last snapshot, to size
	// the next one (0 before the first).
	snapBytesPerEntry int
	// store is what differs between the kinds of backend beyond the
	// states' own storage: memBackend (mem_backend.go) or pebbleBackend
	// (pebble.go). It is not on the per-record path.
	store keyedStore[K]
	// frozenLive counts the Frozen views not closed yet (see cow.go); they
	// close on other goroutines.
	frozenLive atomic.Int32
}

// NewBackend returns an empty backend for the key groups of r, with no
// current key, and DefaultCodec[K]() as its key codec (see SetKeyCodec).
func NewBackend[K comparable](r keygroup.Range) *Backend[K] {
	b := &Backend[K]{rng: r, epoch: 1, tables: make(map[string]table), kc: DefaultCodec[K]()}
	b.store = memBackend[K]{b}
	return b
}

// keyedStore is a kind of backend: the backend-level operations whose
// implementation depends on where the entries are. The states' per-record
// operations are not here (see ValueState.ext).
type keyedStore[K comparable] interface {
	// kind is Backend.Kind.
	kind() string
	// attach returns the backend's table of s, a state just created: s
	// itself in memory, a wrapper that keeps its entries on Pebble.
	attach(s table) table
	// load gives the state t, about to be registered as name, the entries
	// restored for name (or checks them); on error t is not registered.
	load(name string, kind Kind, typ string, t table) error
	// clearKeyGroup is Backend.ClearKeyGroup.
	clearKeyGroup(kg int)
	// snapshot and appendSnapshot are Backend.SnapshotKeyGroup and
	// Backend.AppendSnapshotKeyGroup.
	snapshot(kg int) ([]byte, error)
	appendSnapshot(dst []byte, kg int) ([]byte, error)
	// restore is Backend.RestoreKeyGroup.
	restore(kg int, blob []byte) error
	// freeze is Backend.Freeze.
	freeze() *Frozen[K]
	// close is Backend.Close; it is idempotent.
	close() error
}

// Kind returns the kind of the backend: BackendMemory or BackendPebble.
func (b *Backend[K]) Kind() string { return b.store.kind() }

// Close releases the backend. A Pebble backend closes its database and
// removes its working directory. The backend must not be used after;
// closing twice is a no-op.
func (b *Backend[K]) Close() error { return b.store.close() }

// SetCurrentKey makes key, which belongs to key group keyGroup, the key that
// every state of this backend reads and writes. It panics if keyGroup is
// outside the backend's range: that is a routing bug. The backend cannot
// check that keyGroup is the key group of key; the caller computes it.
//
// It is on the per-record path and small enough to be inlined.
func (b *Backend[K]) SetCurrentKey(key K, keyGroup int) {
	if !b.rng.Contains(keyGroup) {
		panic(routingError{keyGroup, key, b.rng})
	}
	b.key = key
	b.kg = keyGroup
	b.slot = keyGroup - b.rng.Start
	b.hasKey = true
	b.lazy = false
	b.epoch++
}

// SetKeyGroupFunc gives the backend the function that computes a key's key
// group (keygroup.Assign of the key's hash for the job's max parallelism),
// for SetCurrentKeyLazy. It is set once, before the first record.
func (b *Backend[K]) SetKeyGroupFunc(f func(K) int) { b.kgOf = f }

// SetCurrentKeyLazy is SetCurrentKey for a key whose key group the caller
// has not computed: the backend computes it with the SetKeyGroupFunc
// function only when something needs it (a state's access that is not
// served by its key index, CurrentKeyGroup, a snapshot of the key), and the
// routing check of SetCurrentKey (I3) happens then. A record whose value
// state entry is found in the state's index over all key groups (I6) never
// pays for the key-group hash.
//
// It is on the per-record path and small enough to be inlined.
func (b *Backend[K]) SetCurrentKeyLazy(key K) {
	b.key = key
	b.hasKey = true
	b.lazy = true
	b.epoch++
}

// resolve computes the current key's key group after SetCurrentKeyLazy,
// with the routing check of SetCurrentKey (I3).
func (b *Backend[K]) resolve() {
	if b.kgOf == nil {
		panic("state: SetCurrentKeyLazy without SetKeyGroupFunc")
	}
	kg := b.kgOf(b.key)
	if !b.rng.Contains(kg) {
		panic(routingError{kg, b.key, b.rng})
	}
	b.kg = kg
	b.slot = kg - b.rng.Start
	b.lazy = false
}

// routingError is the panic of SetCurrentKey. It is formatted only when
// printed, so that SetCurrentKey stays small enough to be inlined.
type routingError struct {
	kg  int
	key any
	rng keygroup.Range
}

func (e routingError) Error() string {
	return fmt.Sprintf("state: key group %d of key %v is outside this backend's key-group range %v (routing bug)",
		e.kg, e.key, e.rng)
}

// CurrentKey returns the current key (the zero K before SetCurrentKey).
func (b *Backend[K]) CurrentKey() K { return b.key }

// CurrentKeyGroup returns the key group of the current key (-1 before
// SetCurrentKey).
func (b *Backend[K]) CurrentKeyGroup() int {
	if !b.hasKey {
		return -1
	}
	if b.lazy {
		b.resolve()
	}
	return b.kg
}

// Range returns the key groups this backend owns.
func (b *Backend[K]) Range() keygroup.Range { return b.rng }

// StateNames returns the names of the registered states, sorted.
func (b *Backend[K]) StateNames() []string {
	names := make([]string, 0, len(b.tables))
	for n := range b.tables {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Table returns the type-erased view of the state registered as name.
func (b *Backend[K]) Table(name string) (Table, bool) {
	t, ok := b.tables[name]
	return Table{t}, ok
}

// ClearKeyGroup drops every entry of key group kg from every state, releasing
// its maps (used when a key group leaves the subtask), and the restored
// entries of kg waiting for states not registered yet. It panics if kg is
// outside the range.
func (b *Backend[K]) ClearKeyGroup(kg int) { b.store.clearKeyGroup(kg) }

// slotIndex returns the key-group slot of the current key, panicking if no
// key is set. It is small enough to be inlined into every state access.
func (b *Backend[K]) slotIndex() int {
	if !b.hasKey {
		panicNoKey()
	}
	if b.lazy {
		b.resolve()
	}
	return b.slot
}

func panicNoKey() {
	panic("state: keyed state accessed with no current key (call SetCurrentKey first)")
}

func (b *Backend[K]) checkKeyGroup(kg int) int {
	if !b.rng.Contains(kg) {
		panic(fmt.Sprintf("state: key group %d is outside this backend's key-group range %v", kg, b.rng))
	}
	return kg - b.rng.Start
}

// Kind is the kind of a registered state.
type Kind int

// The kinds of state.
const (
	KindValue Kind = iota + 1
	KindList
	KindMap
	KindNamespacedValue
	KindNamespacedList
)

func (k Kind) String() string {
	switch k {
	case KindValue:
		return "value"
	case KindList:
		return "list"
	case KindMap:
		return "map"
	case KindNamespacedValue:
		return "namespaced value"
	case KindNamespacedList:
		return "namespaced list"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Table is the type-erased view of one registered state, for operators,
// snapshots and introspection: it counts, iterates and drops the entries of
// a key group. These key-group operations are deliberately not methods of
// the state handles (ValueState, ListState, ...), whose methods read and
// write the current key only; get a Table with Backend.Table, or iterate one
// key group with typed values with the functions of keygroups.go
// (ForEachValue, ...). Entry iteration through ForEachAny boxes keys and
// values (it allocates) and is meant for snapshots and tools, not for the
// per-record path. The zero Table is not usable.
type Table struct{ t table }

// Name is the name the state was registered under.
func (t Table) Name() string { return t.t.Name() }

// Kind is the kind of state.
func (t Table) Kind() Kind { return t.t.Kind() }

// Type describes the state's type parameters, e.g. "map[string]int64".
func (t Table) Type() string { return t.t.Type() }

// NumKeys is the number of entries over all key groups: keys for value,
// list and map state, (key, namespace) pairs for namespaced state.
func (t Table) NumKeys() int { return t.t.numKeys() }

// NumKeysInKeyGroup is NumKeys restricted to key group kg. It panics if kg
// is outside the backend's range.
func (t Table) NumKeysInKeyGroup(kg int) int { return t.t.numKeysInKeyGroup(kg) }

// ClearKeyGroup drops every entry of key group kg. It panics if kg is
// outside the backend's range.
func (t Table) ClearKeyGroup(kg int) { t.t.clearKeyGroup(kg) }

// ForEachAny calls f for every entry of key group kg, in unspecified order.
// namespace is nil for non-namespaced state. value is V for value state, []V
// for list state and map[UK]UV for map state; slices and maps are the
// state's own and must not be modified or retained. f must not modify the
// state.
func (t Table) ForEachAny(kg int, f func(key, namespace, value any)) { t.t.forEachAny(kg, f) }

// desc is shared by all state kinds.
type desc[K comparable] struct {
	b    *Backend[K]
	name string
	kind Kind
	typ  string
}

func (d *desc[K]) Name() string { return d.name }
func (d *desc[K]) Kind() Kind   { return d.kind }
func (d *desc[K]) Type() string { return d.typ }

// The handle methods implement table: the state handle a table belongs to,
// for register.
func (s *ValueState[K, V]) handle() any              { return s }
func (s *ListState[K, V]) handle() any               { return s }
func (s *MapState[K, UK, UV]) handle() any           { return s }
func (s *NamespacedValueState[K, N, V]) handle() any { return s }
func (s *NamespacedListState[K, N, V]) handle() any  { return s }

func typeName[T any]() string { return reflect.TypeFor[T]().String() }

// register returns the existing state registered as name if it has type S,
// an error if name is taken by a state of another kind or type, and otherwise
// the state made by create, filled with the restored entries waiting for name
// (if any), registered. If those entries cannot be decoded the state is not
// registered and the error says why.
func register[K comparable, S table](b *Backend[K], name string, kind Kind, typ string, create func(d desc[K]) S) (S, error) {
	var zero S
	if existing, ok := b.tables[name]; ok {
		if s, ok := existing.handle().(S); ok {
			return s, nil
		}
		return zero, fmt.Errorf("state: %q is already registered as %s state %s; cannot register it as %s state %s",
			name, existing.Kind(), existing.Type(), kind, typ)
	}
	s := create(desc[K]{b: b, name: name, kind: kind, typ: typ})
	t := b.store.attach(s)
	if err := b.store.load(name, kind, typ, t); err != nil {
		return zero, err
	}
	b.tables[name] = t
	return s, nil
}

// codecOr returns c, or DefaultCodec[T]() if c is nil.
func codecOr[T any](c Codec[T]) Codec[T] {
	if c == nil {
		return DefaultCodec[T]()
	}
	return c
}

func must[S any](s S, err error) S {
	if err != nil {
		panic(err)
	}
	return s
}

// groups is a slice indexed by key group - range start of lazily created maps.
type groups[M ~map[MK]MV, MK comparable, MV any] []M

func (g groups[M, MK, MV]) numKeys() int {
	n := 0
	for _, m := range g {
		n += len(m)
	}
	return n
}

// The key-group operations of the value, list and map states in memory: the
// state's per-key-group maps g, with its copy-on-write pins. (On another
// backend the state's table is not the handle; see register.)

func numKeysInGroup[K comparable, M ~map[K]E, E any](d *desc[K], g groups[M, K, E], kg int) int {
	return len(g[d.b.checkKeyGroup(kg)])
}

func clearGroup[K comparable, M ~map[K]E, E any](d *desc[K], g groups[M, K, E], cow *cowPins, kg int) {
	i := d.b.checkKeyGroup(kg)
	g[i] = nil
	cow.drop(i)
}
