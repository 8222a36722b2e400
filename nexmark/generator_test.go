package nexmark

import (
	"context"
	"encoding/json"
	"math/bits"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	gojson "github.com/goccy/go-json"
	"pgregory.net/rapid"

	"github.com/weirproject/weir"
)

// N1: the same seed and number give the same event; another seed gives
// other draws but the same ids and times (N2, N5).
func TestGeneratorDeterministic(t *testing.T) {
	a, b, c := testGenerator(t, 7), testGenerator(t, 7), testGenerator(t, 8)
	differ := 0
	for n := int64(0); n < 5000; n++ {
		ea, eb, ec := a.Event(n), b.Event(n), c.Event(n)
		if ea != eb {
			t.Fatalf("event %d: two generators of seed 7 differ:\n%+v\n%+v", n, ea, eb)
		}
		if ea.Kind != ec.Kind || ea.Timestamp() != ec.Timestamp() {
			t.Fatalf("event %d: the seed changed its kind or time", n)
		}
		if ea != ec {
			differ++
		}
	}
	if differ < 4000 {
		t.Fatalf("seeds 7 and 8 gave %d different events of 5000", differ)
	}
}

// N5 and N2: kinds in the 1:3:46 proportion, person and auction ids
// consecutive from their first ids, timestamps from the event number, bids
// on auctions and by persons that exist or are at most the lead ahead.
func TestGeneratorShape(t *testing.T) {
	g := testGenerator(t, 1)
	const n = 50 * 400
	var counts [3]int
	nextPerson, nextAuction := int64(FirstPersonID), int64(FirstAuctionID)
	hot := 0
	for i, e := range enumerate(g.Events(0, n)) {
		counts[e.Kind]++
		if want := DefaultBaseTime + i*1000/testRate; e.Timestamp() != want {
			t.Fatalf("event %d at %d, want %d", i, e.Timestamp(), want)
		}
		switch e.Kind {
		case KindPerson:
			if e.Person.ID != nextPerson {
				t.Fatalf("event %d: person %d, want %d", i, e.Person.ID, nextPerson)
			}
			nextPerson++
		case KindAuction:
			a := e.Auction
			if a.ID != nextAuction {
				t.Fatalf("event %d: auction %d, want %d", i, a.ID, nextAuction)
			}
			nextAuction++
			if a.Expires <= a.DateTime || a.Category < FirstCategoryID || a.Category >= FirstCategoryID+NumCategories ||
				a.Reserve < a.InitialBid || a.Seller < FirstPersonID || a.Seller >= nextPerson+personIDLead {
				t.Fatalf("event %d: bad auction %+v", i, a)
			}
		case KindBid:
			b := e.Bid
			if b.Auction < FirstAuctionID || b.Auction >= nextAuction+auctionIDLead || b.Bidder < FirstPersonID ||
				b.Bidder >= nextPerson+personIDLead || b.Price < 100 || b.Price > 100_000_000 || b.Channel == "" {
				t.Fatalf("event %d: bad bid %+v", i, b)
			}
			if (b.Auction-FirstAuctionID)%hotAuctionRatio == 0 {
				hot++
			}
		}
	}
	if counts != [3]int{n / 50, n * 3 / 50, n * 46 / 50} {
		t.Fatalf("persons, auctions, bids = %v, want 1:3:46 of %d", counts, n)
	}
	// HotAuctionRatio 2: about half the bids are on a hot auction.
	if bids := counts[KindBid]; hot < bids*4/10 || hot > bids*7/10 {
		t.Fatalf("%d of %d bids on hot auctions, want about half", hot, bids)
	}
}

// The strings and sizes follow the reference generators (Beam's and Flink
// Nexmark's PersonGenerator, AuctionGenerator, BidGenerator and
// StringsGenerator; docs/nexmark.md lists what was checked): credit cards
// of four zero-padded groups of 0000-9999, item names of 3-19 and
// descriptions of 3-99 characters without spaces at the ends, a bid's
// extra padding 100 - 32 bytes give or take 20 % (the reference counts only
// a bid's four numbers), hot channels on half the bids, and 9 in 10 other
// channels' URLs carrying a channel_id of the channel number's reversed
// bits.
func TestGeneratorMatchesReferenceShapes(t *testing.T) {
	g := testGenerator(t, 3)
	card := regexp.MustCompile(`^[0-9]{4} [0-9]{4} [0-9]{4} [0-9]{4}$`)
	var bids, hotChan, otherChan, withID, extraSum int
	for n := range int64(50 * 400) {
		e := g.Event(n)
		switch e.Kind {
		case KindPerson:
			if !card.MatchString(e.Person.CreditCard) {
				t.Fatalf("event %d: credit card %q, want four groups of 4 digits", n, e.Person.CreditCard)
			}
		case KindAuction:
			for _, s := range []struct {
				v   string
				max int
			}{{e.Auction.ItemName, 19}, {e.Auction.Description, 99}} {
				if len(s.v) > s.max || strings.TrimSpace(s.v) != s.v {
					t.Fatalf("event %d: %q: want at most %d characters, no spaces at the ends", n, s.v, s.max)
				}
			}
		case KindBid:
			b := e.Bid
			bids++
			extraSum += len(b.Extra)
			if l := len(b.Extra); l < 68-14 || l > 68+14 {
				t.Fatalf("event %d: bid extra of %d bytes, want 68 +- 20 %%", n, l)
			}
			if slices.Contains(hotChannels[:], b.Channel) {
				hotChan++
				continue
			}
			otherChan++
			i, err := strconv.Atoi(strings.TrimPrefix(b.Channel, "channel-"))
			if err != nil {
				t.Fatalf("event %d: channel %q", n, b.Channel)
			}
			if _, id, ok := strings.Cut(b.URL, "&channel_id="); ok {
				withID++
				if want := strconv.Itoa(int(javaAbs(int32(bits.Reverse32(uint32(i)))))); id != want {
					t.Fatalf("event %d: channel %d has channel_id %s, want %s", n, i, id, want)
				}
			}
		}
	}
	if hotChan < bids*4/10 || hotChan > bids*6/10 {
		t.Fatalf("%d of %d bids on hot channels, want about half", hotChan, bids)
	}
	if withID < otherChan*8/10 || withID > otherChan*95/100 {
		t.Fatalf("%d of %d other channels' URLs have a channel_id, want about 9 in 10", withID, otherChan)
	}
	if avg := float64(extraSum) / float64(bids); avg < 66 || avg > 70 {
		t.Fatalf("bid extra averages %.1f bytes, want about 68", avg)
	}
}

// javaAbs is Java's Math.abs on an int: the minimum stays negative.
func javaAbs(v int32) int32 {
	if v < 0 {
		return -v
	}
	return v
}

func enumerate(seq iterSeq) func(func(int64, Event) bool) {
	return func(yield func(int64, Event) bool) {
		i := int64(0)
		for e := range seq {
			if !yield(i, e) {
				return
			}
			i++
		}
	}
}

// Generating an event allocates nothing (N4).
func TestGeneratorAllocatesNothing(t *testing.T) {
	g := testGenerator(t, 1)
	var e Event
	n := int64(0)
	if a := testing.AllocsPerRun(1000, func() { g.Fill(n, &e); n++ }); a != 0 {
		t.Fatalf("%.1f allocations per event", a)
	}
}

// The JSON of an event decodes (encoding/json and the Kafka source's
// decoder) to the same event.
func TestEventJSONRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g := MustNew(Config{Seed: rapid.Uint64().Draw(t, "seed"), EventsPerSecond: rapid.Int64Range(1, 1e8).Draw(t, "rate")})
		n := rapid.Int64Range(0, 1<<40).Draw(t, "n")
		e := g.Event(n)
		b := e.AppendJSON(nil)
		var std, fast Event
		if err := json.Unmarshal(b, &std); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if err := gojson.Unmarshal(b, &fast); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if std != e || fast != e {
			t.Fatalf("%s decodes to\n%+v\n%+v, want\n%+v", b, std, fast, e)
		}
	})
}

// N6: the source emits every event exactly once for any number of splits
// and any parallelism, each split in increasing time.
func TestSourceSplits(t *testing.T) {
	g := testGenerator(t, 4)
	const n = 3001
	var want []string
	for e := range g.Events(0, n) {
		want = append(want, string(e.AppendJSON(nil)))
	}
	slices.Sort(want)
	for _, c := range []struct{ splits, parallelism int }{{1, 1}, {3, 1}, {3, 2}, {2, 4}, {7, 3}} {
		env := weir.NewEnvironment(weir.Config{Parallelism: c.parallelism})
		out := weir.Collect(Source(env, "nexmark", g, n, c.splits))
		if err := env.Execute(context.Background()); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range out.Records() {
			if r.Timestamp != r.Value.Timestamp() {
				t.Fatalf("record timestamp %d, event time %d", r.Timestamp, r.Value.Timestamp())
			}
			got = append(got, string(r.Value.AppendJSON(nil)))
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("splits %d, parallelism %d: %d events, want the %d of the generator", c.splits, c.parallelism, len(got), len(want))
		}
	}
}

func TestConfigValidate(t *testing.T) {
	if _, err := New(Config{EventsPerSecond: -1}); err == nil || err.Error() != "nexmark: Config.EventsPerSecond -1: want 0 (the default) or more" {
		t.Fatalf("err %v", err)
	}
	if _, err := New(Config{BaseTime: -5}); err == nil {
		t.Fatal("a negative BaseTime was taken")
	}
}
