// Package state is weir's in-memory keyed state backend: value, list and map
// state scoped to the current key, and value and list state scoped to the
// current key and a namespace (for windows), all partitioned by key group as
// in Flink's HeapKeyedStateBackend.
//
// A Backend belongs to one operator subtask. The runtime calls SetCurrentKey
// before handing a record or a timer to user code; every state registered on
// the backend then reads and writes that key's entries.
//
// # What it guarantees
//
//  1. Scoping. A state access touches only the current key's entry (and, for
//     namespaced state, only the given namespace's entry). Distinct keys,
//     namespaces and state names never share entries.
//  2. Key groups. Each state keeps a slice indexed by keyGroup - Range().Start
//     of lazily created Go maps, so a key's entry lives in the slot of the key
//     group given to SetCurrentKey, and one key group can be iterated
//     (ForEach, ForEachKey, Table.ForEachAny) or dropped (ClearKeyGroup)
//     without touching the others.
//  3. Routing. SetCurrentKey panics if the key group is outside the
//     backend's range; accessing state before any SetCurrentKey panics.
//  4. No garbage entries. Clearing a key's value or list, updating a list to
//     empty, or removing the last entry of a key's map removes the key from
//     its key group's map, so NumKeys counts only live entries.
//  5. Registration. Registering a name twice with the same kind and types
//     returns the same state object; with another kind or types it returns an
//     error naming both (the Must* helpers panic with it instead).
//  6. Cost. Reading or updating an existing entry is a slice index plus one
//     map operation (two for map state) and does not allocate.
//  7. List ownership. Slices returned by Get and passed to ForEach are the
//     state's own storage: valid until the next modification of that list,
//     never to be modified or retained by the caller. Update copies its
//     argument.
//
// # What it does not do
//
//   - It is not safe for concurrent use: one subtask goroutine owns it.
//   - It does not compute key groups: the caller passes the key group of the
//     key (keygroup.KeyGroupOf) and the backend trusts it.
//   - It does not serialize or checkpoint; a snapshot writer iterates one key
//     group at a time with ForEach / Table.ForEachAny, and restore is
//     SetCurrentKey followed by ordinary writes.
//   - Iteration order within a key group is unspecified.
//   - It has no TTL, no copy-on-write snapshots and no size accounting;
//     snapshots are taken synchronously on the subtask goroutine.
package state
