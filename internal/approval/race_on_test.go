//go:build race

package approval

const raceEnabled = true
