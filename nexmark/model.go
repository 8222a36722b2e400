package nexmark

import "strconv"

// Kind says which of an Event's three values is set.
type Kind uint8

const (
	// KindPerson is a new user (Event.Person).
	KindPerson Kind = 0
	// KindAuction is a new auction (Event.Auction).
	KindAuction Kind = 1
	// KindBid is a bid on an auction (Event.Bid).
	KindBid Kind = 2
)

// String returns "person", "auction" or "bid".
func (k Kind) String() string {
	switch k {
	case KindPerson:
		return "person"
	case KindAuction:
		return "auction"
	case KindBid:
		return "bid"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Person is a user of the auction site (the reference's Person). DateTime
// is the event time in Unix milliseconds.
type Person struct {
	ID           int64  `json:"id"`
	Name         string `json:"name"`
	EmailAddress string `json:"emailAddress"`
	CreditCard   string `json:"creditCard"`
	City         string `json:"city"`
	State        string `json:"state"`
	DateTime     int64  `json:"dateTime"`
	Extra        string `json:"extra"`
}

// Auction is an item put up for auction by Seller (a Person's ID); it is
// open from DateTime to Expires (Unix milliseconds, Expires > DateTime).
type Auction struct {
	ID          int64  `json:"id"`
	ItemName    string `json:"itemName"`
	Description string `json:"description"`
	InitialBid  int64  `json:"initialBid"`
	Reserve     int64  `json:"reserve"`
	DateTime    int64  `json:"dateTime"`
	Expires     int64  `json:"expires"`
	Seller      int64  `json:"seller"`
	Category    int64  `json:"category"`
	Extra       string `json:"extra"`
}

// Bid is Bidder's (a Person's ID) bid of Price (in cents) on Auction (an
// Auction's ID) at DateTime (Unix milliseconds).
type Bid struct {
	Auction  int64  `json:"auction"`
	Bidder   int64  `json:"bidder"`
	Price    int64  `json:"price"`
	Channel  string `json:"channel"`
	URL      string `json:"url"`
	DateTime int64  `json:"dateTime"`
	Extra    string `json:"extra"`
}

// Event is one Nexmark event: the value named by Kind is set, the other two
// are zero. The three are held inline rather than by pointer so that
// generating, decoding and passing an event allocates nothing; the strings
// of generated events share a few read-only backing arrays (N4).
type Event struct {
	Kind    Kind    `json:"event_type"`
	Person  Person  `json:"person"`
	Auction Auction `json:"auction"`
	Bid     Bid     `json:"bid"`
}

// Timestamp returns the event's time (its value's DateTime), Unix ms.
func (e *Event) Timestamp() int64 {
	switch e.Kind {
	case KindPerson:
		return e.Person.DateTime
	case KindAuction:
		return e.Auction.DateTime
	}
	return e.Bid.DateTime
}

// AppendJSON appends e as one JSON object to b and returns the extended
// buffer: {"event_type":K,"person"|"auction"|"bid":{...}}, the field names
// of the Flink Nexmark connector's JSON, dateTime and expires as Unix
// milliseconds. Only the value named by Kind is written; decoding the
// object into an Event (encoding/json, or the Kafka source's JSON
// deserializer) gives back e.
func (e *Event) AppendJSON(b []byte) []byte {
	b = append(b, `{"event_type":`...)
	b = strconv.AppendInt(b, int64(e.Kind), 10)
	switch e.Kind {
	case KindPerson:
		p := &e.Person
		b = append(b, `,"person":{"id":`...)
		b = strconv.AppendInt(b, p.ID, 10)
		b = appendStr(b, `,"name":`, p.Name)
		b = appendStr(b, `,"emailAddress":`, p.EmailAddress)
		b = appendStr(b, `,"creditCard":`, p.CreditCard)
		b = appendStr(b, `,"city":`, p.City)
		b = appendStr(b, `,"state":`, p.State)
		b = appendInt(b, `,"dateTime":`, p.DateTime)
		b = appendStr(b, `,"extra":`, p.Extra)
	case KindAuction:
		a := &e.Auction
		b = append(b, `,"auction":{"id":`...)
		b = strconv.AppendInt(b, a.ID, 10)
		b = appendStr(b, `,"itemName":`, a.ItemName)
		b = appendStr(b, `,"description":`, a.Description)
		b = appendInt(b, `,"initialBid":`, a.InitialBid)
		b = appendInt(b, `,"reserve":`, a.Reserve)
		b = appendInt(b, `,"dateTime":`, a.DateTime)
		b = appendInt(b, `,"expires":`, a.Expires)
		b = appendInt(b, `,"seller":`, a.Seller)
		b = appendInt(b, `,"category":`, a.Category)
		b = appendStr(b, `,"extra":`, a.Extra)
	default:
		d := &e.Bid
		b = append(b, `,"bid":{"auction":`...)
		b = strconv.AppendInt(b, d.Auction, 10)
		b = appendInt(b, `,"bidder":`, d.Bidder)
		b = appendInt(b, `,"price":`, d.Price)
		b = appendStr(b, `,"channel":`, d.Channel)
		b = appendStr(b, `,"url":`, d.URL)
		b = appendInt(b, `,"dateTime":`, d.DateTime)
		b = appendStr(b, `,"extra":`, d.Extra)
	}
	return append(b, "}}"...)
}

func appendInt(b []byte, name string, v int64) []byte {
	return strconv.AppendInt(append(b, name...), v, 10)
}

const hexDigits = "0123456789abcdef"

// appendStr appends name and s as a JSON string (quotes, backslashes and
// control characters escaped; other bytes as they are).
func appendStr(b []byte, name, s string) []byte {
	b = append(b, name...)
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&15])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
