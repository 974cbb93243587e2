//go:build nri_debug_gc

package adaptation

// debugGC: built with the nri_debug_gc tag, every callback from the core
// collects garbage before it looks up its handle (see handleValue). For
// tests only: a collection per callback costs far more than the callback.
const debugGC = true
