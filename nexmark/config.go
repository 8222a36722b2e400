package nexmark

import (
	"fmt"
)

// The reference generator's fixed numbers (Beam's GeneratorConfig and the
// model generators; the Flink Nexmark generator keeps them), each checked
// against both sources (docs/nexmark.md, "The constants").
const (
	// FirstPersonID is the id of the first person; ids then count up.
	FirstPersonID = 1000
	// FirstAuctionID is the id of the first auction.
	FirstAuctionID = 1000
	// FirstCategoryID is the lowest category; categories are
	// FirstCategoryID to FirstCategoryID+NumCategories-1.
	FirstCategoryID = 10
	// NumCategories is the number of auction categories.
	NumCategories = 5

	// PersonProportion, AuctionProportion and BidProportion: of every
	// TotalProportion consecutive event numbers, the first is a person,
	// the next three are auctions and the last 46 are bids.
	PersonProportion  = 1
	AuctionProportion = 3
	BidProportion     = 46
	TotalProportion   = PersonProportion + AuctionProportion + BidProportion

	// personIDLead and auctionIDLead: a random person or auction may be
	// one not created yet, up to this many ids ahead.
	personIDLead  = 10
	auctionIDLead = 10
	// hotSellerRatio, hotAuctionRatio, hotBidderRatio: a hot seller
	// (bidder, auction) is the first (second, first) of the last batch of
	// this many persons (auctions).
	hotSellerRatio  = 100
	hotAuctionRatio = 100
	hotBidderRatio  = 100
	// hotChannelsRatio: a bid comes from one of the hot channels unless a
	// draw of [0, hotChannelsRatio) gives 0.
	hotChannelsRatio = 2
	// numChannels is the number of other channels.
	numChannels = 10_000
)

// Config is how a Generator makes events. The zero value is the reference
// generator's default configuration at Flink Nexmark's event rate, with
// seed 0; every field documents its default.
type Config struct {
	// Seed selects the random draws (names, prices, choices of auction
	// and bidder, ...). The same Seed and event number give the same event
	// (N1). Default 0.
	Seed uint64
	// EventsPerSecond is the rate of event time: event n has timestamp
	// BaseTime + floor(n * 1000 / EventsPerSecond) ms (N2). It does not
	// pace the generator, which runs as fast as it is read. 0 means
	// 10,000,000, the rate of Flink Nexmark's published runs (100M events
	// over 10 s of event time); the reference's own default is 10,000.
	EventsPerSecond int64
	// BaseTime is the timestamp of event 0, Unix ms. 0 means
	// DefaultBaseTime (a fixed time, so that runs are reproducible; the
	// reference takes the wall clock at start).
	BaseTime int64
	// NumActivePeople is how many of the latest persons a random choice of
	// person picks from. 0 means 1000.
	NumActivePeople int64
	// NumInFlightAuctions is how many of the latest auctions a random
	// choice of auction picks from; it also sets the average auction
	// length (N3). 0 means 100.
	NumInFlightAuctions int64
	// HotAuctionRatio: a bid is on a hot auction unless a draw of
	// [0, HotAuctionRatio) gives 0 (so with 2, half of all bids). 0 means 2.
	HotAuctionRatio int64
	// HotSellersRatio: an auction's seller is a hot seller unless a draw
	// of [0, HotSellersRatio) gives 0. 0 means 4.
	HotSellersRatio int64
	// HotBiddersRatio: a bid's bidder is a hot bidder unless a draw of
	// [0, HotBiddersRatio) gives 0. 0 means 4.
	HotBiddersRatio int64
	// AvgPersonByteSize, AvgAuctionByteSize, AvgBidByteSize set the
	// length of the Extra fields (padding to about this size). 0 means
	// 200, 500 and 100.
	AvgPersonByteSize, AvgAuctionByteSize, AvgBidByteSize int
}

// DefaultBaseTime is BaseTime's default: 2015-07-15T00:00:00Z (the date of
// the Flink Nexmark examples), in Unix ms.
const DefaultBaseTime int64 = 1436918400000

// withDefaults returns c with zero fields replaced by their defaults.
func (c Config) withDefaults() Config {
	def := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.EventsPerSecond, 10_000_000)
	def(&c.BaseTime, DefaultBaseTime)
	def(&c.NumActivePeople, 1000)
	def(&c.NumInFlightAuctions, 100)
	def(&c.HotAuctionRatio, 2)
	def(&c.HotSellersRatio, 4)
	def(&c.HotBiddersRatio, 4)
	if c.AvgPersonByteSize == 0 {
		c.AvgPersonByteSize = 200
	}
	if c.AvgAuctionByteSize == 0 {
		c.AvgAuctionByteSize = 500
	}
	if c.AvgBidByteSize == 0 {
		c.AvgBidByteSize = 100
	}
	return c
}

// Validate reports the first field that is out of range (negative numbers,
// which have no meaning), or nil.
func (c Config) Validate() error {
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"EventsPerSecond", c.EventsPerSecond},
		{"NumActivePeople", c.NumActivePeople},
		{"NumInFlightAuctions", c.NumInFlightAuctions},
		{"HotAuctionRatio", c.HotAuctionRatio},
		{"HotSellersRatio", c.HotSellersRatio},
		{"HotBiddersRatio", c.HotBiddersRatio},
		{"AvgPersonByteSize", int64(c.AvgPersonByteSize)},
		{"AvgAuctionByteSize", int64(c.AvgAuctionByteSize)},
		{"AvgBidByteSize", int64(c.AvgBidByteSize)},
	} {
		if f.v < 0 {
			return fmt.Errorf("nexmark: Config.%s %d: want 0 (the default) or more", f.name, f.v)
		}
	}
	if c.BaseTime < 0 {
		return fmt.Errorf("nexmark: Config.BaseTime %d: want a Unix time in ms >= 0 (0: the default)", c.BaseTime)
	}
	return nil
}
