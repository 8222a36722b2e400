package embed

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"unicode"
)

// DefaultOfflineDimensions is Offline's dimension when Dimensions is 0.
const DefaultOfflineDimensions = 256

// Offline is a Model that needs no server: a hashed bag of words (see the
// package documentation, I4). Similar texts get similar vectors
// only as far as they share words: good enough to test retrieval and run
// examples, not a semantic model. The zero value is ready to use.
type Offline struct {
	// Dimensions of the vectors; 0 means DefaultOfflineDimensions.
	Dimensions int
	// Seed varies the hashing between otherwise equal models.
	Seed int64
}

// Dim returns the dimension of o's vectors.
func (o *Offline) Dim() int {
	if o.Dimensions <= 0 {
		return DefaultOfflineDimensions
	}
	return o.Dimensions
}

// Embed implements Model.
func (o *Offline) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if o.Dimensions < 0 {
		return nil, fmt.Errorf("embed: offline model with %d dimensions; use a positive number, or 0 for %d", o.Dimensions, DefaultOfflineDimensions)
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = o.Vector(t)
	}
	return out, nil
}

// Vector returns the vector of text.
func (o *Offline) Vector(text string) []float32 {
	dim := o.Dim()
	v := make([]float32, dim)
	var seed [8]byte
	binary.LittleEndian.PutUint64(seed[:], uint64(o.Seed))
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		if len(w) < 2 || stopWords[w] {
			continue
		}
		x := fnvOffset
		for _, b := range seed {
			x = (x ^ uint64(b)) * fnvPrime
		}
		for j := 0; j < len(w); j++ {
			x = (x ^ uint64(w[j])) * fnvPrime
		}
		sign := float32(1)
		if x>>63 == 1 {
			sign = -1
		}
		v[(x&(1<<62-1))%uint64(dim)] += sign
	}
	return Normalize(v)
}

// FNV-1a, 64 bits.
const (
	fnvOffset uint64 = 14695981039346656037
	fnvPrime  uint64 = 1099511628211
)

// stopWords are words too common to tell texts apart.
var stopWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`a an and are as at be but by can did do does for from had has have he her his how i if in
		is it its me my no not of on or our she so than that the their them then there these they this to
		was we were what when where which who why will with would you your`) {
		stopWords[w] = true
	}
}
