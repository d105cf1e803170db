//go:build !race

package approval

const raceEnabled = false
