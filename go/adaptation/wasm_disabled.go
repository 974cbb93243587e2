//go:build nri_no_wasm

package adaptation

// Built with upstream's nri_no_wasm tag: no WASM plugins, whatever the
// library supports. New logs ErrWasmDisabled, as upstream's does, and the
// core refuses modules in the plugin directory with "no WASM support"
// (nri_options_disable_wasm). wasm_lend.go and wasm_engine.go, the lent
// wazero engine, are left out.

/*
#include "nri.h"
*/
import "C"

const wasmBuiltIn = false

// setWasmEngine has the core refuse WASM plugins, as upstream's build with
// the tag has none.
func (r *Adaptation) setWasmEngine(opts *C.nri_options, cerr **C.nri_error) C.nri_status {
	return C.nri_options_disable_wasm(opts, cerr)
}
