//go:build !race

package adaptation

// raceIOSync is a no-op without the race detector (see race.go).
func raceIOSync() {}
