//go:build !nri_debug_gc

package adaptation

// debugGC is off in every build but the nri_debug_gc test build (see
// debug_gc.go).
const debugGC = false
