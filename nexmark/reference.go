package nexmark

import (
	"cmp"
	"iter"
	"slices"
)

// The Ref functions compute each query's answer in plain Go over a
// sequence of events, the obvious way (maps, sorts, a pass or two): the
// model the engine's queries are tested against, and the hand-written loop
// `weir bench nexmark` sets beside them. They assume the events of one
// Generator in event-number order, iterate the sequence up to twice, and
// call emit once per result, in an order of their own (tests compare
// results as sorted sets). Window arithmetic is written out here, not taken
// from package window.

// RefQ0 emits every bid.
func RefQ0(events iter.Seq[Event], emit func(Bid)) {
	for e := range events {
		if e.Kind == KindBid {
			emit(e.Bid)
		}
	}
}

// RefQ1 emits every bid in euros.
func RefQ1(events iter.Seq[Event], emit func(Q1Out)) {
	for e := range events {
		if e.Kind == KindBid {
			b := e.Bid
			emit(Q1Out{Auction: b.Auction, Bidder: b.Bidder, Price: Q1Rate * float64(b.Price), DateTime: b.DateTime, Extra: b.Extra})
		}
	}
}

// RefQ2 emits the bids on auctions whose id Q2Modulus divides.
func RefQ2(events iter.Seq[Event], emit func(Q2Out)) {
	for e := range events {
		if e.Kind == KindBid && e.Bid.Auction%Q2Modulus == 0 {
			emit(Q2Out{Auction: e.Bid.Auction, Price: e.Bid.Price})
		}
	}
}

// RefQ3 emits every (person in OR, ID or CA, their auction of category
// Q3Category) pair.
func RefQ3(events iter.Seq[Event], emit func(Q3Out)) {
	persons := map[int64]Person{}
	for e := range events {
		if e.Kind == KindPerson {
			persons[e.Person.ID] = e.Person
		}
	}
	for e := range events {
		if e.Kind != KindAuction || e.Auction.Category != Q3Category {
			continue
		}
		if p, ok := persons[e.Auction.Seller]; ok && q3State(p.State) {
			emit(Q3Out{Name: p.Name, City: p.City, State: p.State, Auction: e.Auction.ID})
		}
	}
}

// RefWinningBids emits every auction with at least one bid within its
// time, with its highest such bid.
func RefWinningBids(events iter.Seq[Event], emit func(Closed)) {
	auctions := map[int64]Auction{}
	for e := range events {
		if e.Kind == KindAuction {
			auctions[e.Auction.ID] = e.Auction
		}
	}
	best := map[int64]int64{}
	for e := range events {
		if e.Kind != KindBid {
			continue
		}
		a, ok := auctions[e.Bid.Auction]
		if !ok || e.Bid.DateTime < a.DateTime || e.Bid.DateTime > a.Expires {
			continue
		}
		if p, seen := best[a.ID]; !seen || e.Bid.Price > p {
			best[a.ID] = e.Bid.Price
		}
	}
	for id, p := range best {
		a := auctions[id]
		emit(Closed{Auction: id, Seller: a.Seller, Category: a.Category, Expires: a.Expires, Price: p})
	}
}

// RefQ4 emits, per category, the average winning price over all its
// closed auctions (the engine's last answer per category).
func RefQ4(events iter.Seq[Event], emit func(Q4Out)) {
	sums := map[int64]*sumCount{}
	RefWinningBids(events, func(c Closed) {
		s := sums[c.Category]
		if s == nil {
			s = &sumCount{}
			sums[c.Category] = s
		}
		s.Sum += c.Price
		s.Count++
	})
	for cat, s := range sums {
		emit(Q4Out{Category: cat, Count: s.Count, Avg: float64(s.Sum) / float64(s.Count)})
	}
}

// RefQ5 emits, per hopping window, the auctions with the most bids.
func RefQ5(events iter.Seq[Event], emit func(Q5Out)) {
	size, slide := Q5Size.Milliseconds(), Q5Slide.Milliseconds()
	type wa struct{ end, auction int64 }
	counts := map[wa]int64{}
	for e := range events {
		if e.Kind != KindBid {
			continue
		}
		t := e.Bid.DateTime
		// Every window [end-size, end) with end a multiple of slide that
		// contains t.
		for end := floorDiv(t, slide)*slide + slide; end-size <= t; end += slide {
			counts[wa{end, e.Bid.Auction}]++
		}
	}
	maxOf := map[int64]int64{}
	for k, n := range counts {
		maxOf[k.end] = max(maxOf[k.end], n)
	}
	for k, n := range counts {
		if n == maxOf[k.end] {
			emit(Q5Out{Auction: k.auction, Num: n, WindowEnd: k.end})
		}
	}
}

// RefQ6 emits, per closed auction, its seller's average winning price
// over their last Q6Last closed auctions in (Expires, auction id) order.
func RefQ6(events iter.Seq[Event], emit func(Q6Out)) {
	bySeller := map[int64][]Closed{}
	RefWinningBids(events, func(c Closed) { bySeller[c.Seller] = append(bySeller[c.Seller], c) })
	for seller, cs := range bySeller {
		slices.SortFunc(cs, func(a, b Closed) int {
			return cmp.Or(cmp.Compare(a.Expires, b.Expires), cmp.Compare(a.Auction, b.Auction))
		})
		for i, c := range cs {
			lo := max(0, i+1-Q6Last)
			var sum int64
			for _, d := range cs[lo : i+1] {
				sum += d.Price
			}
			emit(Q6Out{Seller: seller, Auction: c.Auction, Avg: float64(sum) / float64(i+1-lo)})
		}
	}
}

// RefQ7 emits, per tumbling window, the bids with the highest price.
func RefQ7(events iter.Seq[Event], emit func(Q7Out)) {
	size := Q7Size.Milliseconds()
	best := map[int64][]Bid{}
	for e := range events {
		if e.Kind != KindBid {
			continue
		}
		end := floorDiv(e.Bid.DateTime, size)*size + size
		cur := best[end]
		switch {
		case len(cur) == 0 || e.Bid.Price > cur[0].Price:
			best[end] = []Bid{e.Bid}
		case e.Bid.Price == cur[0].Price:
			best[end] = append(cur, e.Bid)
		}
	}
	for end, bids := range best {
		for _, b := range bids {
			emit(Q7Out{Bid: b, WindowEnd: end})
		}
	}
}

// RefQ8 emits the persons who created an auction in the tumbling window in
// which they joined.
func RefQ8(events iter.Seq[Event], emit func(Q8Out)) {
	size := Q8Size.Milliseconds()
	type idw struct{ id, start int64 }
	sellers := map[idw]bool{}
	for e := range events {
		if e.Kind == KindAuction {
			sellers[idw{e.Auction.Seller, floorDiv(e.Auction.DateTime, size) * size}] = true
		}
	}
	for e := range events {
		if e.Kind != KindPerson {
			continue
		}
		start := floorDiv(e.Person.DateTime, size) * size
		if sellers[idw{e.Person.ID, start}] {
			emit(Q8Out{ID: e.Person.ID, Name: e.Person.Name, WindowStart: start})
		}
	}
}

// RefQ11 emits every session of every bidder: bids in time order, a new
// session when a bid comes more than Q11Gap after the previous one.
func RefQ11(events iter.Seq[Event], emit func(Q11Out)) {
	gap := Q11Gap.Milliseconds()
	times := map[int64][]int64{}
	for e := range events {
		if e.Kind == KindBid {
			times[e.Bid.Bidder] = append(times[e.Bid.Bidder], e.Bid.DateTime)
		}
	}
	for bidder, ts := range times {
		slices.Sort(ts)
		start, last, n := ts[0], ts[0], int64(1)
		for _, t := range ts[1:] {
			if t-last > gap {
				emit(Q11Out{Bidder: bidder, Count: n, Start: start, End: last + gap})
				start, n = t, 0
			}
			last = t
			n++
		}
		emit(Q11Out{Bidder: bidder, Count: n, Start: start, End: last + gap})
	}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
