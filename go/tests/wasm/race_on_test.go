//go:build race

package wasm

// underRace: the race detector makes upstream's WASM compiler (wazero)
// take minutes per module; make test runs this package without it.
const underRace = true
