//go:build race

package main

// underRace: the race detector makes upstream's WASM compiler (wazero)
// take minutes per module; the smoke run leaves the WASM case out then.
const underRace = true
