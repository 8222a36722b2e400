#!/usr/bin/env bash
# Runs every Go fuzz target of the module for FUZZTIME each (default 5s),
# one fuzzing worker each (FUZZPARALLEL, default 1), and fails on the first
# crasher (go test writes it to the package's testdata/fuzz/<Target>/: add
# it to the commit that fixes the bug, it then runs with every go test).
#
#   internal/fuzz/run.sh              # every target, 5s each
#   FUZZTIME=60s internal/fuzz/run.sh # longer
#   FUZZTIME=2000x internal/fuzz/run.sh  # a count of inputs (CI): a short timed run
#                                      # fails with "context deadline exceeded" when
#                                      # the cached corpus takes longer to replay
#   internal/fuzz/run.sh -l           # list the targets
#
# The targets are found, not listed by hand: every func Fuzz* in a
# _test.go file of the module. At the time of writing:
#
#   ./agent/kafkastore  FuzzDecodeState       Kafka store state values (binary or JSON)
#   ./agent/wal         FuzzReplay            WAL segments (replay on Open)
#   ./checkpoint        FuzzRead              checkpoint and savepoint files
#   ./connector/jsonl   FuzzSource            JSON Lines files
#   ./codec             FuzzKeyCodecs         key, namespace and value codecs
#   ./connector/kafka   FuzzJSONDeserializer  Kafka record values (JSON)
#   ./pipeline          FuzzParse             pipeline files (YAML)
#   ./state             FuzzRestoreKeyGroup   keyed-state snapshot blobs
#   ./timer             FuzzServiceRestoreKeyGroup  timer snapshot blobs
set -euo pipefail
cd "$(dirname "$0")/../.."
FUZZTIME="${FUZZTIME:-5s}"
FUZZPARALLEL="${FUZZPARALLEL:-1}"
# Bounds the minimization of each new interesting input (go test's default
# is 60s): in a big test binary (./agent/wal links the agent runtime) an
# execution is slow, and one minimization would take the whole FUZZTIME.
FUZZMINIMIZETIME="${FUZZMINIMIZETIME:-5s}"

targets() {
	git ls-files --cached --others --exclude-standard '*_test.go' | xargs grep -H '^func Fuzz[A-Za-z0-9_]*(f \*testing.F)' |
		sed -E 's#^(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*)\(.*#./\1 \2#; s#^[^.].*_test\.go:func (Fuzz[A-Za-z0-9_]*)\(.*#. \1#' |
		sort -u
}

if [ "${1:-}" = "-l" ]; then
	targets
	exit 0
fi

status=0
while read -r pkg name; do
	echo "== $pkg $name ($FUZZTIME)"
	if ! go test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZETIME" -parallel "$FUZZPARALLEL" "$pkg"; then
		echo "!! $pkg $name found a failure (see $pkg/testdata/fuzz/$name/)"
		status=1
	fi
done < <(targets)
exit $status
