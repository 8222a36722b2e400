package sinkconformance

import (
	"context"
	"slices"
	"testing"
	"time"
)

// RunKillMode runs the kill9 mode alone against s, reporting to t (which
// may be a recorder that a test inspects).
func RunKillMode(t testing.TB, s Sink, o Options) {
	o = o.withDefaults()
	var want []string
	for sp := range o.Splits {
		for i := range o.Records {
			want = append(want, record(sp, i))
		}
	}
	slices.Sort(want)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	runKill(ctx, t, s, o, want)
}
