// Package keygroup assigns keys to key groups and key groups to parallel
// subtasks exactly the way Apache Flink does, so that a weir job and a Flink
// job (or a Flink savepoint) agree bit for bit on where every key lives.
//
// # Model
//
// A keyed stream has a fixed number of key groups, its max parallelism
// (maxP, 1..UpperBound). Every key is hashed to a key group once and for all;
// a running job with parallelism p (1..maxP) gives each of its p subtasks a
// contiguous, inclusive range of key groups. Rescaling changes p and moves
// whole key groups between subtasks, never individual keys, which is why maxP
// must stay fixed for the life of a job's state.
//
// The pipeline for a key k is the one of Flink's
// KeyGroupRangeAssignment.assignKeyToParallelOperator:
//
//	hash     = Java hashCode of k                      (HashString, HashInt64, ...)
//	keyGroup = Murmur(hash) % maxP                     (Assign)
//	subtask  = keyGroup * p / maxP                     (OperatorIndex)
//
// and subtask i owns the key groups
//
//	[(i*maxP + p - 1) / p, ((i+1)*maxP - 1) / p]      (RangeFor)
//
// which is Flink's computeKeyGroupRangeForOperatorIndex. All divisions are
// integer divisions; every intermediate product is at most 2^30, so there is
// no overflow on any platform.
//
// # Java hash codes
//
// Flink hashes a key with its Java hashCode. This package reproduces it for
// the key types that have an obvious Go counterpart:
//
//   - string: java.lang.String.hashCode over UTF-16 code units (a character
//     outside the Basic Multilingual Plane counts as two surrogate units).
//     A Go string is treated as the UTF-8 bytes Java would decode with
//     new String(bytes, StandardCharsets.UTF_8); ill-formed bytes become
//     U+FFFD exactly as OpenJDK's decoder replaces them (see HashString).
//   - int32: java.lang.Integer.hashCode.
//   - int64, and Go int: java.lang.Long.hashCode.
//   - bool: java.lang.Boolean.hashCode (1231 / 1237).
//
// Composite keys (Flink Tuples, POJOs, Rows, Table/SQL BinaryRowData) use
// other hash functions and are outside the scope of this package.
//
// # Invariants
//
// For every valid pair (maxP, p), meaning Validate(maxP, p) == nil, i.e.
// 1 <= p <= maxP <= UpperBound:
//
//	I1. Murmur(h) >= 0 for every int32 h, and equals Flink's
//	    MathUtils.murmurHash(h).
//	I2. 0 <= Assign(h, maxP) < maxP for every h, and Assign depends only on
//	    h and maxP, never on p: a key's group survives rescaling.
//	I3. RangeFor(maxP, p, 0), ..., RangeFor(maxP, p, p-1) are non-empty,
//	    in ascending order and contiguous: the first starts at 0, each next
//	    one starts right after the previous End, the last ends at maxP-1.
//	    Hence every key group is owned by exactly one subtask.
//	I4. OperatorIndex(kg, maxP, p) == i exactly when
//	    RangeFor(maxP, p, i).Contains(kg), for every 0 <= kg < maxP.
//	I5. Range lengths are maxP/p or maxP/p + 1 (they differ by at most one).
//	I6. HashString, HashInt32, HashInt64 and HashBool return what Java's
//	    String/Integer/Long/Boolean.hashCode return for the same value
//	    (for strings: for new String(utf8Bytes, UTF_8)).
//	I7. A Hasher returned by HasherFor gives the same result as the matching
//	    Hash function applied to the key's underlying value, and performs no
//	    heap allocation per call.
//	I8. DefaultMaxParallelism(p) is a power of two in
//	    [DefaultLowerBound, UpperBound] and Validate(DefaultMaxParallelism(p), p)
//	    == nil for every 1 <= p <= UpperBound.
//
// Functions given arguments outside these bounds panic (see each function);
// use Validate to check configuration up front.
package keygroup
