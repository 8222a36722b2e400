package state

// Typed key-group maintenance for operators.
//
// The state handles' methods read and write the current key only (the
// per-record API). Operators that own a subtask's state also need to visit
// or count the entries of one key group: to rebuild in-memory structures
// after a restore, to skip empty key groups in a checkpoint, or for
// introspection. Those operations are the functions of this file and the
// methods of Table (Backend.Table), not methods of the handles, so that a
// user's process function cannot walk or drop other keys' state by mistake.
// They are not meant for the per-record path.
//
// Every function panics if kg is outside the backend's key-group range. f
// must not modify the state it iterates.

// ForEachValue calls f for every (key, value) of key group kg of s, in
// unspecified order.
func ForEachValue[K comparable, V any](s *ValueState[K, V], kg int, f func(K, V)) {
	s.forEach(kg, f)
}

// ForEachList calls f for every (key, list) of key group kg of s, in
// unspecified order. The lists are the state's own (see ListState.Get).
func ForEachList[K comparable, V any](s *ListState[K, V], kg int, f func(K, []V)) {
	s.forEach(kg, f)
}

// ForEachMapEntry calls f for every (key, user key, value) of key group kg of
// s, in unspecified order.
func ForEachMapEntry[K comparable, UK comparable, UV any](s *MapState[K, UK, UV], kg int, f func(K, UK, UV)) {
	s.forEach(kg, f)
}

// ForEachNamespacedValue calls f for every (key, namespace, value) of key
// group kg of s, in unspecified order.
func ForEachNamespacedValue[K comparable, N comparable, V any](s *NamespacedValueState[K, N, V], kg int, f func(K, N, V)) {
	s.forEach(kg, f)
}

// ForEachNamespacedList calls f for every (key, namespace, list) of key group
// kg of s, in unspecified order. The lists are the state's own (see
// NamespacedListState.Get).
func ForEachNamespacedList[K comparable, N comparable, V any](s *NamespacedListState[K, N, V], kg int, f func(K, N, []V)) {
	s.forEach(kg, f)
}
