package postgres_test

import (
	"strings"
	"testing"

	"github.com/weirproject/weir"
	"github.com/weirproject/weir/connector/postgres"
	"github.com/weirproject/weir/weirtest/sinkconformance"
)

// conformanceSinks are the sink in both exactly-once modes as the
// conformance suite drives it. A destination is "<table> <connection
// string>": the kill9 mode's children write to the test's server.
var conformanceSinks = []sinkconformance.Sink{conformanceSink(postgres.ProgressTable), conformanceSink(postgres.TwoPhase)}

func conformanceSink(mode postgres.Mode) sinkconformance.Sink {
	return sinkconformance.Sink{
		Name: "postgres-" + string(mode),
		Attach: func(st weir.Stream[string], dest string) {
			table, url, _ := strings.Cut(dest, " ")
			postgres.Sink(st, "pg", recordSink(url, table, mode)).UID("pg")
		},
		Committed: func(t testing.TB, dest string) []string {
			table, url, _ := strings.Cut(dest, " ")
			return query(t, url, "SELECT rec FROM "+table)
		},
	}
}

// TestConformance runs the exactly-once sink conformance suite in both
// modes: random in-process failures, and kill -9 of child processes (in
// two-phase mode with prepared transactions pending or open), each
// followed by a restore from the latest checkpoint: the table holds every
// record exactly once (P2, P3, P4), and no prepared transaction is left
// once the jobs end.
func TestConformance(t *testing.T) {
	s := server(t)
	for _, sink := range conformanceSinks {
		t.Run(sink.Name, func(t *testing.T) {
			sink.NewDest = func(t testing.TB) string { return newTable(t, s, "conf", "rec text NOT NULL") + " " + s.ConnString }
			sinkconformance.Run(t, sink, sinkconformance.Options{Records: 500})
			if got := query(t, s.ConnString, "SELECT gid FROM pg_prepared_xacts"); len(got) != 0 {
				t.Fatalf("prepared transactions left: %v", got)
			}
		})
	}
}
