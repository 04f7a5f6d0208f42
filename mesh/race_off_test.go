//go:build !race

package mesh_test

// raceOn reports whether the tests run with the race detector.
const raceOn = false
