//go:build !linux && !nri_no_wasm

package adaptation

import "github.com/tetratelabs/wazero/experimental"

// wasmMemoryAllocator has no reservation to offer where the engine is not
// used in practice: a nil allocator leaves wazero's own, which keeps each
// memory in the Go heap and frees it with the module.
func wasmMemoryAllocator(uint64) (experimental.MemoryAllocator, func()) {
	return nil, func() {}
}
