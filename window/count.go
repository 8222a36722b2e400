package window

// Count returns the aggregate that counts a window's records (merging
// windows add their counts), for Aggregate and AggregateKeyed:
//
//	perMinute := window.AggregateKeyed(ks, "per-minute", window.Tumbling(time.Minute), window.Count[Order]())
func Count[T any]() AggregateFunction[T, int64, int64] { return counter[T]{} }

type counter[T any] struct{}

func (counter[T]) CreateAccumulator() int64 { return 0 }
func (counter[T]) Add(_ T, n int64) int64   { return n + 1 }
func (counter[T]) Result(n int64) int64     { return n }
func (counter[T]) Merge(a, b int64) int64   { return a + b }
