//go:build !nri_no_wasm

package adaptation

// The core's lent WASM engine (nri_options_set_wasm_engine): the modules
// its compiled-module cache does not hold run here, on wazero, as upstream
// runs every module, so that a node's first start with a WASM plugin costs
// what upstream's costs instead of a Cranelift compile. The engine itself
// is in wasm_engine.go; this file is its cgo side.

/*
#cgo CFLAGS: -DNRI_GO_WASM
#include <stdint.h>
#include <stdlib.h>
#include "nri.h"
#include "shims.h"
*/
import "C"

import (
	"fmt"
	"runtime/cgo"
	"time"
	"unsafe"
)

// wasmBuiltIn says that this package runs WASM plugins: it was built
// without upstream's nri_no_wasm tag (wasm_disabled.go).
const wasmBuiltIn = true

// setWasmEngine lends the core wazero for the modules its cache lacks (for
// every module, when the library compiles none), unless the runtime wants
// them compiled at start and the library can.
func (r *Adaptation) setWasmEngine(opts *C.nri_options, cerr **C.nri_error) C.nri_status {
	if r.wasmCompiledAtStart && CompilesWasm() {
		return C.NRI_STATUS_OK
	}
	return C.nri_go_set_wasm_engine(opts, C.uintptr_t(cgo.NewHandle(wazeroLender{})), cerr)
}

// wazeroLender is the lent engine's user data. It holds nothing: each
// module has a handle of its own.
type wazeroLender struct{}

//export nriGoWasmLoad
func nriGoWasmLoad(h C.uintptr_t, name *C.char, wasm *C.uint8_t, n C.size_t, memoryLimit, initTimeoutNs C.uint64_t, module *C.uintptr_t, reply *C.nri_reply) {
	raceIOSync()
	defer raceIOSync()
	defer recoverInto(reply, "WASM engine")
	// The module's bytes are copied: the core's are valid only during the
	// call, and the compiled module may refer to them later.
	bytes := C.GoBytes(unsafe.Pointer(wasm), C.int(n))
	m, err := loadWasmModule(C.GoString(name), bytes, uint64(memoryLimit), time.Duration(initTimeoutNs))
	if err != nil {
		replyError(reply, err.Error())
		return
	}
	*module = C.uintptr_t(cgo.NewHandle(m))
}

//export nriGoWasmCall
func nriGoWasmCall(h, module C.uintptr_t, method *C.char, req *C.uint8_t, n C.size_t, timeoutNs C.uint64_t, reply *C.nri_reply) (status C.uint32_t) {
	raceIOSync()
	defer raceIOSync()
	defer func() {
		if p := recover(); p != nil {
			replyError(reply, fmt.Sprintf("panic in WASM engine: %v", p))
			status = C.NRI_WASM_STATUS_DEAD
		}
	}()
	m := handleValue(module).(*wasmModule)
	// The request is read in place: the engine copies it into the module's
	// memory before this callback returns. The reply is copied from the
	// module's memory into the core's reply directly; should the call fail
	// after that (the module's free traps), the error set below is what
	// the core reads, not the data.
	setData := func(view []byte) []byte {
		p, l := bytesArg(view)
		C.nri_reply_set_data(reply, p, l)
		return nil
	}
	_, st, text := m.call(C.GoString(method), cBytes(req, n), time.Duration(timeoutNs), setData)
	switch st {
	case wasmOK:
		return C.NRI_WASM_STATUS_OK
	case wasmRefused:
		replyError(reply, text)
		return C.NRI_WASM_STATUS_REFUSED
	case wasmTimeout:
		return C.NRI_WASM_STATUS_TIMEOUT
	default:
		replyError(reply, text)
		return C.NRI_WASM_STATUS_DEAD
	}
}

//export nriGoWasmRelease
func nriGoWasmRelease(h, module C.uintptr_t) {
	defer func() { _ = recover() }()
	handle := cgo.Handle(module)
	handle.Value().(*wasmModule).close()
	handle.Delete()
}
