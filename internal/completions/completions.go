// Package completions hands finished work from worker goroutines to the
// goroutine that owns an operator's state, one mailbox letter per batch:
// the completion path of the agent operator (agent/completion.go) and of
// asyncio's operator, written once.
//
// A worker that finishes an item pushes it on a lock-free stack; the push
// that finds the stack empty tells its caller to post the letter, and the
// letter, on the owning goroutine, takes every item at once and applies
// them in the order they finished:
//
//	worker:  if stack.Push(x) { mailbox.Post(letter) }
//	letter:  for x := stack.TakeAll(); x != nil; x = next(x) { apply(x) }
//
// A mutex-guarded slice would do the same with a lock per item and a slice
// to recycle; a channel would need a goroutine, or a letter per item, on
// the owning side. Invariants:
//
//	C1. Push neither blocks nor allocates; it links the item through its
//	    own Next field (the item must not be on the stack already).
//	C2. One letter per batch: Push returns true exactly when the stack was
//	    empty, so while a posted letter has not run TakeAll no other push
//	    asks for one, and every item pushed is returned by the first
//	    TakeAll that starts after its Push: none is lost or taken twice.
//	C3. Order: TakeAll returns the items oldest push first, linked through
//	    Next, the last one's Next nil; the items are then the caller's.
package completions

import "sync/atomic"

// Linked is the constraint of the items: a pointer type whose Next returns
// the address of the item's link field, which the stack owns from Push to
// TakeAll.
type Linked[T any] interface {
	*T
	Next() **T
}

// Stack is the stack of finished items (C1-C3). Its zero value is empty.
// Push may be called from any goroutine, TakeAll from one at a time.
type Stack[T any, P Linked[T]] struct {
	top atomic.Pointer[T]
}

// Push puts x on the stack and reports whether the stack was empty: the
// caller then posts the letter that takes the batch (C2).
func (s *Stack[T, P]) Push(x *T) (first bool) {
	link := P(x).Next()
	for {
		top := s.top.Load()
		*link = top
		if s.top.CompareAndSwap(top, x) {
			return top == nil
		}
	}
}

// TakeAll empties the stack and returns its items, oldest push first
// (C3), or nil when it is empty.
func (s *Stack[T, P]) TakeAll() *T {
	top := s.top.Swap(nil)
	var list *T
	for top != nil {
		link := P(top).Next()
		next := *link
		*link = list
		list, top = top, next
	}
	return list
}
