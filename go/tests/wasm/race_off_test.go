//go:build !race

package wasm

const underRace = false
