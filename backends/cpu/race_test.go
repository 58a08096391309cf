//go:build race

package cpu_test

// raceEnabled: the race detector drops sync.Pool items at random.
const raceEnabled = true
