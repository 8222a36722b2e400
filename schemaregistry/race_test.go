//go:build race

package schemaregistry_test

// raceOn: the race detector slows the HTTP and Kafka round trips about
// tenfold; the model test runs fewer checks under it.
const raceOn = true
