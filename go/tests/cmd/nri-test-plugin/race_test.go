//go:build race

package main

// raceEnabled builds the plugin under test with -race too.
const raceEnabled = true
