//go:build !race

package schemaregistry_test

const raceOn = false
