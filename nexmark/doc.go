// Package nexmark is the Nexmark benchmark on weir: a deterministic event
// generator with the reference generator's semantics (Apache Beam's
// Nexmark GeneratorConfig and model generators, which the Flink Nexmark
// suite keeps), as a weir source (bounded or unbounded, in splits) and as a
// producer of JSON into Kafka (the embedded broker, package broker); the
// queries q0-q8 and q11 on weir's Go API; and a plain Go reference of each
// query (the Ref functions) that the tests hold the queries to and that
// `weir bench nexmark` measures beside them. docs/nexmark.md describes the
// queries, how to run them and what the figures mean.
//
// # Guarantees
//
//	N1. Determinism. Event n is a function of the Config (Seed included)
//	    and n only: each event draws from its own random stream, seeded
//	    from (Seed, n). The same seed and event count give the same events
//	    in every run, process and split.
//	N2. Time. Event n has timestamp BaseTime + floor(n * 1000 /
//	    EventsPerSecond) ms, so timestamps never decrease with n.
//	N3. Auctions. Auction and person ids count up from FirstAuctionID and
//	    FirstPersonID in event order; an auction lasts 1 ms to twice the
//	    event time it takes to create NumInFlightAuctions more auctions
//	    (the reference's rule), so about that many are open at a time.
//	    Sellers, bidders and auctions are picked as the reference picks
//	    them: hot ones (the first or second of the latest batch of 100)
//	    with probability 1 - 1/ratio, else uniformly among the active or
//	    in-flight ones or up to 10 ids not created yet.
//	N4. Cost. Generating an event allocates nothing: strings are cut from
//	    text and tables made once per Generator (New), which is read-only
//	    afterwards and safe for concurrent use.
//	N5. Proportions. Of each 50 consecutive event numbers from 0, the first
//	    is a person, the next 3 are auctions and the other 46 bids
//	    (KindOf).
//	N6. Splits. Source in S splits emits, in split s, the event numbers
//	    s, s+S, s+2S, ... in order: every event exactly once whatever S
//	    and the parallelism, each split in time order. Produce writes
//	    event n to partition n % P, so Kafka partitions are splits too.
//
// # Where it differs from the reference
//
//   - The random draws are not Java's java.util.Random: the same rules
//     with another stream of numbers, so events are distributed as the
//     reference's are but are not the same events.
//   - BaseTime is fixed (DefaultBaseTime) rather than the wall clock at
//     start, and the generator is not paced: EventsPerSecond sets event
//     time only (Flink's runs do not pace either at their 10M events/s).
//   - Names, e-mail addresses, credit cards and channel URLs come from
//     tables of a few thousand entries drawn once; free text (item names,
//     descriptions, extra) is cut from one random text.
//   - JSON carries dateTime and expires as Unix milliseconds (Flink's
//     connector writes timestamps as strings).
//   - Each query's doc comment says where weir's version departs from the
//     Flink Nexmark SQL.
package nexmark
