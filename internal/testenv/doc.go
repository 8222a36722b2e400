// Package testenv holds what tests of several packages share: a context
// that ends with the test, an embedded Kafka broker closed with the test,
// and the process's CPU time for benchmarks (internal/cputime). It is for tests only; no
// production package imports it.
package testenv
