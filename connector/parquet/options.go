package parquet

import (
	"fmt"
	"strings"
	"time"

	pq "github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/compress/snappy"
	"github.com/parquet-go/parquet-go/compress/uncompressed"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/weirproject/weir/checkpoint"
)

// DefaultPartition is the partition pattern of the zero Options.
const DefaultPartition = "dt={yyyy}-{MM}-{dd}/hour={HH}"

// NoPartition as Options.Partition writes every part file in the root.
const NoPartition = "none"

// DefaultRollSize is the roll size of the zero Options (128 MiB).
const DefaultRollSize = 128 << 20

// maxRollSize bounds RollSize: an S3 CopyObject (how a part is published
// on a bucket) copies at most 5 GiB.
const maxRollSize = 5 << 30

// Options configure the sink. The zero value (with Path set) writes zstd
// part files of at most 128 MiB partitioned by day and hour.
type Options struct {
	// Path is the root: a directory path, file:///dir, or
	// s3://BUCKET/PREFIX, gs://BUCKET/PREFIX, azblob://CONTAINER/PREFIX
	// (checkpoint-location syntax; the scheme's driver must be linked in,
	// as for checkpoints). Required.
	Path string
	// Partition is the directory of a record's part file under Path,
	// formatted from its event time in UTC: literal text with the
	// placeholders {yyyy} {MM} {dd} {HH} {mm}. "" means DefaultPartition;
	// NoPartition ("none") writes every file in the root.
	Partition string
	// RollSize starts a new part file of a partition once the current one
	// has reached this many bytes (an estimate: written bytes plus the
	// uncompressed buffered row group). 0 means DefaultRollSize; at most 5 GiB.
	RollSize int64
	// RowGroupSize ends a row group once its buffered (uncompressed) size
	// reaches it. 0 means min(RollSize, 64 MiB).
	RowGroupSize int64
	// Compression is the codec of every column: "zstd" (the default, ""),
	// "snappy" or "none".
	Compression string
}

// Validate returns an error naming what is wrong with o, and what is
// accepted, or nil.
func (o Options) Validate() error {
	if o.Path == "" {
		return fmt.Errorf("parquet: no path; want a directory or a URL (file://, s3://, gs://, azblob://)")
	}
	if err := checkpoint.CheckLocation(o.Path); err != nil {
		return fmt.Errorf("parquet: path: %s", strings.TrimPrefix(err.Error(), "checkpoint: "))
	}
	if _, err := parsePartition(o.Partition); err != nil {
		return err
	}
	if o.RollSize < 0 || o.RollSize > maxRollSize {
		return fmt.Errorf("parquet: rollSize %d: want a size between 1 byte and 5 GiB (0 for the default, 128 MiB)", o.RollSize)
	}
	if o.RowGroupSize < 0 {
		return fmt.Errorf("parquet: rowGroupSize %d: want a positive size (0 for the default)", o.RowGroupSize)
	}
	if _, err := codec(o.Compression); err != nil {
		return err
	}
	return nil
}

func (o Options) rollSize() int64 {
	if o.RollSize == 0 {
		return DefaultRollSize
	}
	return o.RollSize
}

func (o Options) rowGroupSize() int64 {
	if o.RowGroupSize > 0 {
		return o.RowGroupSize
	}
	return min(o.rollSize(), 64<<20)
}

// Compressions are the accepted values of Options.Compression.
var Compressions = []string{"zstd", "snappy", "none"}

func codec(name string) (compress.Codec, error) {
	switch name {
	case "", "zstd":
		return &zstd.Codec{Level: zstd.SpeedDefault}, nil
	case "snappy":
		return &snappy.Codec{}, nil
	case "none":
		return &uncompressed.Codec{}, nil
	}
	return nil, fmt.Errorf("parquet: compression %q: want one of zstd (default), snappy, none", name)
}

func writerOptions(o Options) []pq.WriterOption {
	c, _ := codec(o.Compression)
	return []pq.WriterOption{pq.Compression(c), pq.CreatedBy("weir", "", "")}
}

// partitioner formats a partition directory from an event time; it keeps
// the last result, since consecutive records mostly share a partition.
type partitioner struct {
	parts []string // literal text and placeholders, alternately
	unit  int64    // milliseconds of the finest placeholder (0: no placeholder)
	none  bool

	lastStart int64
	last      string
	valid     bool
}

var placeholders = map[string]int64{
	"{yyyy}": 0, "{MM}": 0, "{dd}": 24 * 3600 * 1000, "{HH}": 3600 * 1000, "{mm}": 60 * 1000,
}

func parsePartition(p string) (*partitioner, error) {
	if p == NoPartition {
		return &partitioner{none: true}, nil
	}
	if p == "" {
		p = DefaultPartition
	}
	bad := func(why string) error {
		return fmt.Errorf("parquet: partition %q: %s; want directories of literal text and {yyyy} {MM} {dd} {HH} {mm} (UTC), such as %s, or %q", p, why, DefaultPartition, NoPartition)
	}
	if strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") || strings.Contains(p, "//") {
		return nil, bad("a leading, trailing or double slash")
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "." || seg == ".." || strings.HasPrefix(seg, ".") || strings.HasPrefix(seg, "_") {
			return nil, bad(fmt.Sprintf("directory %q is hidden or relative (starts with . or _; readers skip those)", seg))
		}
	}
	pt := &partitioner{unit: 0}
	finest := int64(0)
	rest := p
	for rest != "" {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			pt.parts = append(pt.parts, rest)
			break
		}
		pt.parts = append(pt.parts, rest[:i])
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return nil, bad("an unclosed {")
		}
		ph := rest[i : i+j+1]
		u, ok := placeholders[ph]
		if !ok {
			return nil, bad("unknown placeholder " + ph)
		}
		// Years and months vary in length: cache per day at least.
		if u == 0 {
			u = 24 * 3600 * 1000
		}
		if finest == 0 || u < finest {
			finest = u
		}
		pt.parts = append(pt.parts, ph)
		rest = rest[i+j+1:]
	}
	for _, part := range pt.parts {
		if strings.ContainsAny(part, "\\:*?\"<>|") {
			return nil, bad("a character that is not portable in file and object names")
		}
	}
	if finest == 0 {
		finest = 1 << 50 // no placeholder: one directory for every time
	}
	pt.unit = finest
	return pt, nil
}

// dir returns the partition directory of event time ts (Unix ms); "" when
// the sink is not partitioned.
func (pt *partitioner) dir(ts int64) string {
	if pt.none {
		return ""
	}
	start := ts - ((ts%pt.unit)+pt.unit)%pt.unit
	if pt.valid && start == pt.lastStart {
		return pt.last
	}
	t := time.UnixMilli(ts).UTC()
	var b strings.Builder
	for _, part := range pt.parts {
		switch part {
		case "{yyyy}":
			fmt.Fprintf(&b, "%04d", t.Year())
		case "{MM}":
			fmt.Fprintf(&b, "%02d", int(t.Month()))
		case "{dd}":
			fmt.Fprintf(&b, "%02d", t.Day())
		case "{HH}":
			fmt.Fprintf(&b, "%02d", t.Hour())
		case "{mm}":
			fmt.Fprintf(&b, "%02d", t.Minute())
		default:
			b.WriteString(part)
		}
	}
	pt.lastStart, pt.last, pt.valid = start, b.String(), true
	return pt.last
}
