package nexmark

import (
	"cmp"
	"slices"
	"time"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/runtime"
	"github.com/weirproject/weir/state"
	"github.com/weirproject/weir/window"
)

// Window sizes of the queries, as in the Flink Nexmark SQL.
const (
	// Q5Size and Q5Slide: q5's hopping windows.
	Q5Size, Q5Slide = 10 * time.Second, 2 * time.Second
	// Q7Size is q7's tumbling window.
	Q7Size = 10 * time.Second
	// Q8Size is q8's tumbling window.
	Q8Size = 10 * time.Second
	// Q11Gap is q11's session gap.
	Q11Gap = 10 * time.Second
	// Q2Modulus: q2 keeps the bids on auctions whose id it divides.
	Q2Modulus = 123
	// Q1Rate converts q1's dollars to euros.
	Q1Rate = 0.908
	// Q6Last is how many closed auctions q6 averages per seller.
	Q6Last = 10
	// Q3Category is the category q3 suggests items of.
	Q3Category = 10
)

// Bids returns the bids of events.
func Bids(events weir.Stream[Event]) weir.Stream[Bid] {
	return weir.FlatMap(events, "bids", func(e Event, emit func(Bid)) {
		if e.Kind == KindBid {
			emit(e.Bid)
		}
	})
}

// Q0 is pass-through: every bid, unchanged.
//
//	SELECT auction, bidder, price, dateTime, extra FROM bid
func Q0(events weir.Stream[Event]) weir.Stream[Bid] { return Bids(events) }

// Q1Out is a bid with its price in euros.
type Q1Out struct {
	Auction, Bidder int64
	Price           float64
	DateTime        int64
	Extra           string
}

// Q1 is currency conversion: every bid with its price times Q1Rate.
//
//	SELECT auction, bidder, 0.908 * price as price, dateTime, extra FROM bid
func Q1(events weir.Stream[Event]) weir.Stream[Q1Out] {
	return weir.FlatMap(events, "q1", func(e Event, emit func(Q1Out)) {
		if e.Kind == KindBid {
			b := &e.Bid
			emit(Q1Out{Auction: b.Auction, Bidder: b.Bidder, Price: Q1Rate * float64(b.Price), DateTime: b.DateTime, Extra: b.Extra})
		}
	})
}

// Q2Out is an auction id and a price.
type Q2Out struct{ Auction, Price int64 }

// Q2 is selection: the bids on every Q2Modulus-th auction.
//
//	SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0
func Q2(events weir.Stream[Event]) weir.Stream[Q2Out] {
	return weir.FlatMap(events, "q2", func(e Event, emit func(Q2Out)) {
		if e.Kind == KindBid && e.Bid.Auction%Q2Modulus == 0 {
			emit(Q2Out{Auction: e.Bid.Auction, Price: e.Bid.Price})
		}
	})
}

// Q3Out is a seller and one of their auctions.
type Q3Out struct {
	Name, City, State string
	Auction           int64
}

// q3State reports whether q3 keeps persons of state s.
func q3State(s string) bool { return s == "OR" || s == "ID" || s == "CA" }

// Q3 is local item suggestion: the auctions of category Q3Category whose
// seller lives in Oregon, Idaho or California, with the seller's name and
// city. It is a regular (unwindowed) join of persons and auctions keyed by
// person id, in keyed state: a person is kept for the auctions to come,
// an auction whose seller has not appeared yet waits for them. As in the
// SQL, state grows with the persons kept and is never cleared.
//
//	SELECT P.name, P.city, P.state, A.id
//	FROM auction AS A INNER JOIN person AS P on A.seller = P.id
//	WHERE A.category = 10 and (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA')
func Q3(events weir.Stream[Event]) weir.Stream[Q3Out] {
	kept := weir.Filter(events, "q3-filter", func(e Event) bool {
		return (e.Kind == KindPerson && q3State(e.Person.State)) || (e.Kind == KindAuction && e.Auction.Category == Q3Category)
	})
	keyed := weir.KeyBy(kept, func(e Event) int64 {
		if e.Kind == KindPerson {
			return e.Person.ID
		}
		return e.Auction.Seller
	})
	return weir.Process(keyed, "q3-join", func() weir.KeyedProcessFunction[int64, Event, Q3Out] {
		var person *state.ValueState[int64, Q3Out]
		var waiting *state.ListState[int64, int64]
		return weir.ProcessFuncs[int64, Event, Q3Out]{
			OpenFn: func(ctx *weir.KeyedContext[int64, Q3Out]) error {
				person = state.MustValue[int64, Q3Out](ctx.State(), "person")
				waiting = state.MustList[int64, int64](ctx.State(), "waiting-auctions")
				return nil
			},
			ElementFn: func(e Event, ctx *weir.KeyedContext[int64, Q3Out]) error {
				if e.Kind == KindPerson {
					p := Q3Out{Name: e.Person.Name, City: e.Person.City, State: e.Person.State}
					person.Update(p)
					for _, id := range waiting.Get() {
						p.Auction = id
						ctx.Collect(p)
					}
					waiting.Clear()
					return nil
				}
				if p, ok := person.Value(); ok {
					p.Auction = e.Auction.ID
					ctx.Collect(p)
				} else {
					waiting.Add(e.Auction.ID)
				}
				return nil
			},
		}
	})
}

// Closed is an auction that has closed with at least one valid bid, and
// its winning (highest) price: the shared first stage of q4 and q6.
type Closed struct {
	Auction, Seller, Category int64
	// Expires is the auction's end, and the record's timestamp.
	Expires int64
	Price   int64
}

type openAuction struct {
	Seller, Category, DateTime, Expires int64
	Max                                 int64 // -1: no valid bid yet
}

type pendingBid struct{ DateTime, Price int64 }

// WinningBids joins auctions with their bids and emits, when an auction
// expires (the watermark reaches Expires), its highest bid among those
// with DateTime in [auction.DateTime, Expires]. Auctions without such a bid
// emit nothing (an inner join). Keyed by auction id: the auction's row and
// running maximum are kept until it closes; a bid that arrives before its
// auction (another split) waits in state until the watermark passes its
// time, then is dropped if its auction has not come (an auction created
// later than the bid cannot take it).
func WinningBids(events weir.Stream[Event]) weir.Stream[Closed] {
	kept := weir.Filter(events, "winning-bids-filter", func(e Event) bool { return e.Kind != KindPerson })
	keyed := weir.KeyBy(kept, func(e Event) int64 {
		if e.Kind == KindAuction {
			return e.Auction.ID
		}
		return e.Bid.Auction
	})
	return weir.Process(keyed, "winning-bids", func() weir.KeyedProcessFunction[int64, Event, Closed] {
		var open *state.ValueState[int64, openAuction]
		var pending *state.ListState[int64, pendingBid]
		return weir.ProcessFuncs[int64, Event, Closed]{
			OpenFn: func(ctx *weir.KeyedContext[int64, Closed]) error {
				open = state.MustValue[int64, openAuction](ctx.State(), "auction")
				pending = state.MustList[int64, pendingBid](ctx.State(), "early-bids")
				return nil
			},
			ElementFn: func(e Event, ctx *weir.KeyedContext[int64, Closed]) error {
				if e.Kind == KindAuction {
					a := &e.Auction
					o := openAuction{Seller: a.Seller, Category: a.Category, DateTime: a.DateTime, Expires: a.Expires, Max: -1}
					for _, b := range pending.Get() {
						if b.DateTime >= o.DateTime && b.DateTime <= o.Expires {
							o.Max = max(o.Max, b.Price)
						}
					}
					pending.Clear()
					open.Update(o)
					ctx.RegisterEventTimeTimer(o.Expires)
					return nil
				}
				b := &e.Bid
				if o, ok := open.Value(); ok {
					if b.DateTime >= o.DateTime && b.DateTime <= o.Expires && b.Price > o.Max {
						o.Max = b.Price
						open.Update(o)
					}
					return nil
				}
				pending.Add(pendingBid{DateTime: b.DateTime, Price: b.Price})
				ctx.RegisterEventTimeTimer(b.DateTime)
				return nil
			},
			TimerFn: func(ts int64, ctx *weir.KeyedContext[int64, Closed]) error {
				o, ok := open.Value()
				if !ok {
					// Bids whose auction has not come by their time: it
					// cannot come in time for them any more.
					bids := pending.Get()
					keep := bids[:0]
					for _, b := range bids {
						if b.DateTime > ts {
							keep = append(keep, b)
						}
					}
					pending.Update(keep)
					return nil
				}
				if ts < o.Expires {
					return nil
				}
				if o.Max >= 0 {
					ctx.CollectAt(Closed{Auction: ctx.Key(), Seller: o.Seller, Category: o.Category, Expires: o.Expires, Price: o.Max}, o.Expires)
				}
				open.Clear()
				return nil
			},
		}
	})
}

// Q4Out is the average winning price of a category's Count closed
// auctions so far.
type Q4Out struct {
	Category, Count int64
	Avg             float64
}

type sumCount struct{ Sum, Count int64 }

// Q4 is the average price per category: the winning price of each closed
// auction (WinningBids), averaged per category, with an updated average per
// closed auction. weir's version differs from the Flink SQL in when it
// answers: the SQL is an updating aggregate over auctions still open too
// (their highest bid so far); here an auction counts once it has closed,
// as in Beam's Nexmark (its final price is its winning bid).
//
//	SELECT Q.category, AVG(Q.final)
//	FROM (SELECT MAX(B.price) AS final, A.category FROM auction A, bid B
//	      WHERE A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires
//	      GROUP BY A.id, A.category) Q
//	GROUP BY Q.category
func Q4(events weir.Stream[Event]) weir.Stream[Q4Out] {
	keyed := weir.KeyBy(WinningBids(events), func(c Closed) int64 { return c.Category })
	return weir.Process(keyed, "q4-average", func() weir.KeyedProcessFunction[int64, Closed, Q4Out] {
		var acc *state.ValueState[int64, sumCount]
		return weir.ProcessFuncs[int64, Closed, Q4Out]{
			OpenFn: func(ctx *weir.KeyedContext[int64, Q4Out]) error {
				acc = state.MustValue[int64, sumCount](ctx.State(), "sum-count")
				return nil
			},
			ElementFn: func(c Closed, ctx *weir.KeyedContext[int64, Q4Out]) error {
				s, _ := acc.Value()
				s.Sum += c.Price
				s.Count++
				acc.Update(s)
				ctx.Collect(Q4Out{Category: c.Category, Count: s.Count, Avg: float64(s.Sum) / float64(s.Count)})
				return nil
			},
		}
	})
}

// Q5Out is an auction with the most bids (Num) in the window ending at
// WindowEnd (there may be several, tied).
type Q5Out struct{ Auction, Num, WindowEnd int64 }

type q5Count struct{ Auction, Num, WindowEnd int64 }

type q5Max struct {
	Num      int64
	Auctions []int64
}

// Q5 is hot items: per hopping window (Q5Size every Q5Slide), the auctions
// with the most bids. Two keyed stages: bids counted per auction and window
// (a sliding window count), then the counts of each window (keyed by the
// window's end, gathered by a tumbling window of the slide, which holds
// exactly one hopping window's results since they all carry its
// MaxTimestamp) reduced to their maximum.
//
//	SELECT AuctionBids.auction, AuctionBids.num
//	FROM (SELECT auction, count(*) AS num, window_start AS starttime, window_end AS endtime
//	      FROM TABLE(HOP(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
//	      GROUP BY auction, window_start, window_end) AS AuctionBids
//	JOIN (SELECT max(num) AS maxn, starttime, endtime FROM (...the same...) GROUP BY starttime, endtime) AS MaxBids
//	ON AuctionBids.starttime = MaxBids.starttime AND AuctionBids.endtime = MaxBids.endtime
//	   AND AuctionBids.num >= MaxBids.maxn
func Q5(events weir.Stream[Event]) weir.Stream[Q5Out] {
	byAuction := weir.KeyBy(Bids(events), func(b Bid) int64 { return b.Auction })
	counts := window.AggregateProcess(byAuction, "q5-count", window.Sliding(Q5Size, Q5Slide), window.Count[Bid](),
		func(auction int64, w window.Window, n int64, emit func(q5Count)) error {
			emit(q5Count{Auction: auction, Num: n, WindowEnd: w.End})
			return nil
		})
	byWindow := weir.KeyBy(counts, func(c q5Count) int64 { return c.WindowEnd })
	return window.AggregateProcess(byWindow, "q5-max", window.Tumbling(Q5Slide), window.AggregateFuncs[q5Count, q5Max, q5Max]{
		AddFn: func(c q5Count, m q5Max) q5Max {
			switch {
			case c.Num > m.Num:
				m.Num, m.Auctions = c.Num, append(m.Auctions[:0], c.Auction)
			case c.Num == m.Num:
				m.Auctions = append(m.Auctions, c.Auction)
			}
			return m
		},
		ResultFn: func(m q5Max) q5Max { return m },
	}, func(end int64, _ window.Window, m q5Max, emit func(Q5Out)) error {
		for _, a := range m.Auctions {
			emit(Q5Out{Auction: a, Num: m.Num, WindowEnd: end})
		}
		return nil
	})
}

// Q6Out is a seller's average winning price over their last (up to)
// Q6Last closed auctions, as of the close of Auction.
type Q6Out struct {
	Seller, Auction int64
	Avg             float64
}

// Q6 is the average selling price by seller: for each closed auction
// (WinningBids), the average winning price of its seller's last Q6Last
// closed auctions, this one included. Closed auctions are taken per seller
// in the order of their close (Expires, then auction id), which the second
// stage restores by holding them until the watermark passes their time
// (they come from several subtasks of the first). The Flink SQL (which
// Flink cannot run: an over-aggregate on an updating input) takes 10
// PRECEDING AND CURRENT ROW, 11 rows; weir follows Beam and the query's
// description, 10.
func Q6(events weir.Stream[Event]) weir.Stream[Q6Out] {
	keyed := weir.KeyBy(WinningBids(events), func(c Closed) int64 { return c.Seller })
	return weir.Process(keyed, "q6-average", func() weir.KeyedProcessFunction[int64, Closed, Q6Out] {
		var held *state.ListState[int64, Closed]
		var last *state.ListState[int64, int64]
		var scratch []Closed
		var prices []int64
		return weir.ProcessFuncs[int64, Closed, Q6Out]{
			OpenFn: func(ctx *weir.KeyedContext[int64, Q6Out]) error {
				held = state.MustList[int64, Closed](ctx.State(), "held")
				last = state.MustList[int64, int64](ctx.State(), "last-prices")
				return nil
			},
			ElementFn: func(c Closed, ctx *weir.KeyedContext[int64, Q6Out]) error {
				held.Add(c)
				ctx.RegisterEventTimeTimer(c.Expires)
				return nil
			},
			TimerFn: func(ts int64, ctx *weir.KeyedContext[int64, Q6Out]) error {
				scratch = scratch[:0]
				rest := held.Get()
				keep := rest[:0:0]
				for _, c := range rest {
					if c.Expires <= ts {
						scratch = append(scratch, c)
					} else {
						keep = append(keep, c)
					}
				}
				held.Update(keep)
				slices.SortFunc(scratch, func(a, b Closed) int {
					return cmp.Or(cmp.Compare(a.Expires, b.Expires), cmp.Compare(a.Auction, b.Auction))
				})
				prices = append(prices[:0], last.Get()...)
				for _, c := range scratch {
					prices = append(prices, c.Price)
					if len(prices) > Q6Last {
						prices = prices[len(prices)-Q6Last:]
					}
					var sum int64
					for _, p := range prices {
						sum += p
					}
					ctx.CollectAt(Q6Out{Seller: c.Seller, Auction: c.Auction, Avg: float64(sum) / float64(len(prices))}, c.Expires)
				}
				last.Update(prices)
				return nil
			},
		}
	})
}

// Q7Out is a bid with the highest price of the tumbling window ending at
// WindowEnd (there may be several, tied).
type Q7Out struct {
	Bid
	WindowEnd int64
}

type q7Max struct {
	Price int64 // -1: empty
	Bids  []Bid
}

func q7Add(m q7Max, b Bid) q7Max {
	switch {
	case b.Price > m.Price:
		m.Price, m.Bids = b.Price, append(m.Bids[:0], b)
	case b.Price == m.Price:
		m.Bids = append(m.Bids, b)
	}
	return m
}

// Q7 is the highest bid: per tumbling window of Q7Size, the bids with the
// highest price. Two stages, as Flink's planner makes of the SQL's window
// MAX: the highest bids per subtask and window (q7Local, unkeyed), then per
// window (keyed by its end) the highest of those. The SQL's
// BETWEEN also takes the bids at exactly window_end, which belong to the
// next window; weir takes the window's own bids, [start, end).
//
//	SELECT B.auction, B.price, B.bidder, B.dateTime, B.extra
//	FROM bid B JOIN (SELECT MAX(price) AS maxprice, window_end as dateTime
//	                 FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))
//	                 GROUP BY window_start, window_end) B1
//	ON B.price = B1.maxprice
//	WHERE B.dateTime BETWEEN B1.dateTime - INTERVAL '10' SECOND and B1.dateTime
func Q7(events weir.Stream[Event]) weir.Stream[Q7Out] {
	local := weir.Transform(Bids(events), "q7-local", func() runtime.OneInputOperator[Bid, Q7Out] { return newQ7Local() })
	byWindow := weir.KeyBy(local, func(o Q7Out) int64 { return o.WindowEnd })
	return window.AggregateProcess(byWindow, "q7-max", window.Tumbling(Q7Size), window.AggregateFuncs[Q7Out, q7Max, q7Max]{
		CreateFn: func() q7Max { return q7Max{Price: -1} },
		AddFn:    func(o Q7Out, m q7Max) q7Max { return q7Add(m, o.Bid) },
		ResultFn: func(m q7Max) q7Max { return m },
	}, func(end int64, _ window.Window, m q7Max, emit func(Q7Out)) error {
		for _, b := range m.Bids {
			emit(Q7Out{Bid: b, WindowEnd: end})
		}
		return nil
	})
}

// Q8Out is a person who created an auction in the window starting at
// WindowStart in which they joined.
type Q8Out struct {
	ID          int64
	Name        string
	WindowStart int64
}

type q8Acc struct {
	Name               string
	Person, HasAuction bool
}

// Q8 is monitor new users: the persons who joined and created an auction
// within the same tumbling window of Q8Size. A tumbling window per person
// id over persons and auctions (keyed by seller) together, which answers
// when both sides were seen.
//
//	SELECT P.id, P.name, P.starttime
//	FROM (SELECT id, name, window_start AS starttime, window_end AS endtime
//	      FROM TABLE(TUMBLE(TABLE person, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))
//	      GROUP BY id, name, window_start, window_end) P
//	JOIN (SELECT seller, window_start AS starttime, window_end AS endtime
//	      FROM TABLE(TUMBLE(TABLE auction, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))
//	      GROUP BY seller, window_start, window_end) A
//	ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime
func Q8(events weir.Stream[Event]) weir.Stream[Q8Out] {
	kept := weir.Filter(events, "q8-filter", func(e Event) bool { return e.Kind != KindBid })
	keyed := weir.KeyBy(kept, func(e Event) int64 {
		if e.Kind == KindPerson {
			return e.Person.ID
		}
		return e.Auction.Seller
	})
	return window.AggregateProcess(keyed, "q8-join", window.Tumbling(Q8Size), window.AggregateFuncs[Event, q8Acc, q8Acc]{
		AddFn: func(e Event, a q8Acc) q8Acc {
			if e.Kind == KindPerson {
				a.Name, a.Person = e.Person.Name, true
			} else {
				a.HasAuction = true
			}
			return a
		},
		ResultFn: func(a q8Acc) q8Acc { return a },
	}, func(id int64, w window.Window, a q8Acc, emit func(Q8Out)) error {
		if a.Person && a.HasAuction {
			emit(Q8Out{ID: id, Name: a.Name, WindowStart: w.Start})
		}
		return nil
	})
}

// Q11Out is one session of a bidder: Count bids from Start to End (the
// session window [first bid, last bid + Q11Gap)).
type Q11Out struct{ Bidder, Count, Start, End int64 }

// Q11 is user sessions: bids per bidder per session window of gap Q11Gap
// (window.Session's semantics, counted by q11Sessions).
//
//	SELECT B.bidder, count(*) as bid_count,
//	       SESSION_START(B.dateTime, INTERVAL '10' SECOND) as starttime,
//	       SESSION_END(B.dateTime, INTERVAL '10' SECOND) as endtime
//	FROM bid B GROUP BY B.bidder, SESSION(B.dateTime, INTERVAL '10' SECOND)
func Q11(events weir.Stream[Event]) weir.Stream[Q11Out] {
	return q11Sessions(weir.KeyBy(Bids(events), func(b Bid) int64 { return b.Bidder }))
}
