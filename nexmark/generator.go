package nexmark

import (
	"fmt"
	"iter"
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// Generator makes the events of one configuration. Event(n) depends only
// on the configuration and n (N1), so any set of goroutines may each
// generate any subset of the event numbers. A Generator is read-only after
// New and safe for concurrent use.
type Generator struct {
	cfg Config
	// pool is random text that strings are cut from: a generated string
	// is a substring of pool (or of one of the tables below), so making an
	// event allocates nothing (N4).
	pool string
	// Tables drawn from at random; built once from the seed.
	names, emails, cards []string
	channels, urls       []string
	hotURLs              [len(hotChannels)]string
	// numEventsForAuctions is how many events it takes to create
	// NumInFlightAuctions auctions (the horizon of an auction's length).
	numEventsForAuctions int64
}

var (
	usStates    = [...]string{"AZ", "CA", "ID", "OR", "WA", "WY"}
	usCities    = [...]string{"Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne"}
	firstNames  = [...]string{"Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"}
	lastNames   = [...]string{"Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"}
	hotChannels = [...]string{"Google", "Facebook", "Baidu", "Apple"}
)

const (
	poolSize  = 1 << 16
	tableSize = 1 << 12
	urlPrefix = "https://www.nexmark.com/"
	letters   = "abcdefghijklmnopqrstuvwxyz"
	// maxNameLen and maxDescLen: an item name is 3 to 19 characters, a
	// description 3 to 99 (the reference's nextString(20) and (100)).
	maxNameLen   = 20
	maxDescLen   = 100
	minStringLen = 3
	// specialOdds: a generated string's character is a space (or '_' in
	// URLs) with probability 1/specialOdds.
	specialOdds = 13
	// channelIDOdds: a non-hot channel's URL has a channel_id parameter
	// unless a draw of [0, channelIDOdds) gives 0 (9 in 10).
	channelIDOdds = 10
	// bidFixedSize is what the reference counts of a bid before padding
	// it with extra (its four 8-byte numbers; not the channel or URL).
	bidFixedSize = 8 * 4
)

// channelID is the reference's channel_id of channel i: the absolute value
// of i's 32 bits reversed, as Java's Math.abs(Integer.reverse(i)) (which
// leaves the minimum int32, channel 1's, negative).
func channelID(i int) int32 {
	v := int32(bits.Reverse32(uint32(i)))
	if v < 0 {
		v = -v
	}
	return v
}

// New returns a Generator for cfg, or the error of cfg.Validate.
func New(cfg Config) (*Generator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	g := &Generator{cfg: cfg}
	g.numEventsForAuctions = cfg.NumInFlightAuctions * TotalProportion / AuctionProportion
	r := newRand(cfg.Seed, math.MaxInt64)
	pool := make([]byte, poolSize)
	for i := range pool {
		// Letters with a space now and then, like words: the reference's
		// nextString puts its special character (a space) at each position
		// with probability 1/13.
		if r.intn(specialOdds) == 0 {
			pool[i] = ' '
		} else {
			pool[i] = letters[r.intn(len(letters))]
		}
	}
	g.pool = string(pool)
	for _, f := range firstNames {
		for _, l := range lastNames {
			g.names = append(g.names, f+" "+l)
		}
	}
	// word is the reference's nextString(maxLen, special): 3 to maxLen-1
	// characters, each special with probability 1/13, else a lowercase
	// letter; spaces trimmed from both ends.
	word := func(maxLen int, special byte) string {
		b := make([]byte, minStringLen+r.intn(maxLen-minStringLen))
		for i := range b {
			if r.intn(specialOdds) == 0 {
				b[i] = special
			} else {
				b[i] = letters[r.intn(len(letters))]
			}
		}
		return strings.TrimSpace(string(b))
	}
	url := func() string {
		return urlPrefix + word(5, '_') + "/" + word(5, '_') + "/" + word(5, '_') + "/item.htm?query=1"
	}
	for range tableSize {
		g.emails = append(g.emails, word(7, ' ')+"@"+word(5, ' ')+".com")
		g.cards = append(g.cards, fmt.Sprintf("%04d %04d %04d %04d", r.intn(10000), r.intn(10000), r.intn(10000), r.intn(10000)))
	}
	for i := range hotChannels {
		g.hotURLs[i] = url()
	}
	for i := range numChannels {
		g.channels = append(g.channels, "channel-"+strconv.Itoa(i))
		u := url()
		if r.intn(channelIDOdds) > 0 {
			u += "&channel_id=" + strconv.Itoa(int(channelID(i)))
		}
		g.urls = append(g.urls, u)
	}
	return g, nil
}

// MustNew is New for configurations known to be valid; it panics on an
// invalid one.
func MustNew(cfg Config) *Generator {
	g, err := New(cfg)
	if err != nil {
		panic(err)
	}
	return g
}

// Config returns the generator's configuration, defaults filled in.
func (g *Generator) Config() Config { return g.cfg }

// Timestamp returns event n's time, Unix ms (N2).
func (g *Generator) Timestamp(n int64) int64 {
	return g.cfg.BaseTime + mulDiv(n, 1000, g.cfg.EventsPerSecond)
}

// mulDiv returns floor(a*b/c) for a, b, c >= 0 without overflow for the
// event numbers and rates in use (a*b is split when it would overflow).
func mulDiv(a, b, c int64) int64 {
	if a <= math.MaxInt64/b {
		return a * b / c
	}
	q, r := a/c, a%c
	return q*b + r*b/c
}

// KindOf returns the kind of event n: of each TotalProportion consecutive
// numbers (from 0), the first PersonProportion are persons, the next
// AuctionProportion auctions, the rest bids (N5).
func KindOf(n int64) Kind {
	switch rem := n % TotalProportion; {
	case rem < PersonProportion:
		return KindPerson
	case rem < PersonProportion+AuctionProportion:
		return KindAuction
	}
	return KindBid
}

// Event returns event n (n >= 0).
func (g *Generator) Event(n int64) Event {
	var e Event
	g.Fill(n, &e)
	return e
}

// Fill sets *e to event n (n >= 0). Its strings point into the Generator's
// read-only tables.
func (g *Generator) Fill(n int64, e *Event) {
	r := newRand(g.cfg.Seed, n)
	ts := g.Timestamp(n)
	*e = Event{Kind: KindOf(n)}
	switch e.Kind {
	case KindPerson:
		g.person(n, &r, ts, &e.Person)
	case KindAuction:
		g.auction(n, &r, ts, &e.Auction)
	default:
		g.bid(n, &r, ts, &e.Bid)
	}
}

// Events returns events from, from+1, ..., to-1 in order.
func (g *Generator) Events(from, to int64) iter.Seq[Event] {
	return func(yield func(Event) bool) {
		var e Event
		for n := from; n < to; n++ {
			g.Fill(n, &e)
			if !yield(e) {
				return
			}
		}
	}
}

// lastBase0PersonID is the 0-based id of the last person created at or
// before event n.
func lastBase0PersonID(n int64) int64 {
	epoch, off := n/TotalProportion, n%TotalProportion
	if off >= PersonProportion {
		off = PersonProportion - 1
	}
	return epoch*PersonProportion + off
}

// lastBase0AuctionID is the 0-based id of the last auction created at or
// before event n (-1 before the first).
func lastBase0AuctionID(n int64) int64 {
	epoch, off := n/TotalProportion, n%TotalProportion
	switch {
	case off < PersonProportion:
		epoch--
		off = AuctionProportion - 1
	case off >= PersonProportion+AuctionProportion:
		off = AuctionProportion - 1
	default:
		off -= PersonProportion
	}
	return epoch*AuctionProportion + off
}

// randomPerson picks a 0-based person id among the active ones, or up to
// personIDLead not created yet.
func (g *Generator) randomPerson(n int64, r *rng) int64 {
	people := lastBase0PersonID(n) + 1
	active := min(people, g.cfg.NumActivePeople)
	return people - active + r.int63n(active+personIDLead)
}

// randomAuction picks a 0-based auction id among the in-flight ones, or up
// to auctionIDLead not created yet.
func (g *Generator) randomAuction(n int64, r *rng) int64 {
	last := lastBase0AuctionID(n)
	lo := max(last-g.cfg.NumInFlightAuctions, 0)
	return lo + r.int63n(last-lo+1+auctionIDLead)
}

func (g *Generator) person(n int64, r *rng, ts int64, p *Person) {
	p.ID = lastBase0PersonID(n) + FirstPersonID
	p.Name = g.names[r.intn(len(g.names))]
	p.EmailAddress = g.emails[r.intn(len(g.emails))]
	p.CreditCard = g.cards[r.intn(len(g.cards))]
	p.City = usCities[r.intn(len(usCities))]
	p.State = usStates[r.intn(len(usStates))]
	p.DateTime = ts
	size := 8 + len(p.Name) + len(p.EmailAddress) + len(p.CreditCard) + len(p.City) + len(p.State)
	p.Extra = g.extra(r, size, g.cfg.AvgPersonByteSize)
}

func (g *Generator) auction(n int64, r *rng, ts int64, a *Auction) {
	a.ID = lastBase0AuctionID(n) + FirstAuctionID
	if r.int63n(g.cfg.HotSellersRatio) > 0 {
		// The first of the latest batch of hotSellerRatio persons.
		a.Seller = lastBase0PersonID(n) / hotSellerRatio * hotSellerRatio
	} else {
		a.Seller = g.randomPerson(n, r)
	}
	a.Seller += FirstPersonID
	a.Category = FirstCategoryID + int64(r.intn(NumCategories))
	a.InitialBid = price(r)
	a.DateTime = ts
	a.Expires = ts + g.auctionLength(n, r, ts)
	a.ItemName = g.text(r, maxNameLen)
	a.Description = g.text(r, maxDescLen)
	a.Reserve = a.InitialBid + price(r)
	size := 8 + len(a.ItemName) + len(a.Description) + 8*5
	a.Extra = g.extra(r, size, g.cfg.AvgAuctionByteSize)
}

// auctionLength is the reference's: uniform in [1, 2h] ms where h is the
// event time until NumInFlightAuctions more auctions have been created, so
// that about that many are open at any time (N3).
func (g *Generator) auctionLength(n int64, r *rng, ts int64) int64 {
	horizon := g.Timestamp(n+g.numEventsForAuctions) - ts
	return 1 + r.int63n(max(horizon*2, 1))
}

func (g *Generator) bid(n int64, r *rng, ts int64, b *Bid) {
	if r.int63n(g.cfg.HotAuctionRatio) > 0 {
		b.Auction = lastBase0AuctionID(n) / hotAuctionRatio * hotAuctionRatio
	} else {
		b.Auction = g.randomAuction(n, r)
	}
	b.Auction += FirstAuctionID
	if r.int63n(g.cfg.HotBiddersRatio) > 0 {
		// The second of the latest batch, so hot bidders are not the hot
		// sellers.
		b.Bidder = lastBase0PersonID(n)/hotBidderRatio*hotBidderRatio + 1
	} else {
		b.Bidder = g.randomPerson(n, r)
	}
	b.Bidder += FirstPersonID
	b.Price = price(r)
	if r.intn(hotChannelsRatio) > 0 {
		i := r.intn(len(hotChannels))
		b.Channel, b.URL = hotChannels[i], g.hotURLs[i]
	} else {
		i := r.intn(numChannels)
		b.Channel, b.URL = g.channels[i], g.urls[i]
	}
	b.DateTime = ts
	b.Extra = g.extra(r, bidFixedSize, g.cfg.AvgBidByteSize)
}

// price is the reference's: round(10^(6u) * 100) cents for u uniform in
// [0, 1), so from $1 to $1M, log-uniformly.
func price(r *rng) int64 {
	return int64(math.Round(math.Pow(10, r.float64()*6) * 100))
}

// text returns a string of 3 to maxLen-1 characters with spaces trimmed
// from its ends (so possibly shorter), as the reference's nextString.
func (g *Generator) text(r *rng, maxLen int) string {
	n := minStringLen + r.intn(maxLen-minStringLen)
	off := r.intn(len(g.pool) - n)
	return strings.TrimSpace(g.pool[off : off+n])
}

// extra pads an event of size bytes towards avg bytes, as the reference's
// nextExtra: nothing if it is already there, else a string of avg-size
// bytes give or take 20%.
func (g *Generator) extra(r *rng, size, avg int) string {
	if size > avg {
		return ""
	}
	want := avg - size
	delta := int(math.Round(float64(want) * 0.2))
	n := want - delta
	if delta > 0 {
		n += r.intn(2 * delta)
	}
	if n <= 0 {
		return ""
	}
	n = min(n, len(g.pool)-1)
	off := r.intn(len(g.pool) - n)
	return g.pool[off : off+n]
}

// rng is splitmix64: small, fast, and seeded per event from (seed, n) so
// that an event's draws do not depend on any other event (N1).
type rng struct{ s uint64 }

func newRand(seed uint64, n int64) rng {
	r := rng{s: seed ^ (uint64(n)+1)*0x9e3779b97f4a7c15}
	r.next() // mix the seed in before the first draw
	return r
}

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// int63n returns a number in [0, n) for n > 0 (modulo bias below 2^-40 for
// the bounds used here).
func (r *rng) int63n(n int64) int64 { return int64(r.next()>>1) % n }

func (r *rng) intn(n int) int { return int(r.int63n(int64(n))) }

// float64 returns a number in [0, 1).
func (r *rng) float64() float64 { return float64(r.next()>>11) / (1 << 53) }
