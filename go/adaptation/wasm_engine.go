//go:build !nri_no_wasm

package adaptation

// A WASM plugin module run on wazero, at the level of the requests' and
// replies' protobuf encodings. The core compiles and runs modules with
// wasmtime (crates/nri-wasm) and keeps their compiled code; for a module its
// cache does not hold yet, it calls into this engine instead, whose compiler
// is upstream's, so that a node's first start with a WASM plugin costs what
// it costs upstream.
//
// The module side of the interface is upstream's (the go-plugin ABI of
// pkg/api for GOOS=wasip1, API version 1), and every check, step and text
// follows crates/nri-wasm/src/abi.rs and lib.rs, so that a module fails or
// works alike on both engines. Keep the three in step.

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/log"
	"github.com/tetratelabs/wazero"
	wapi "github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"
)

// wasmCallStatus says how a call ended.
type wasmCallStatus int

const (
	// wasmOK: the reply holds the reply's encoding.
	wasmOK wasmCallStatus = iota
	// wasmRefused: the plugin's handler returned an error, the text.
	wasmRefused
	// wasmTimeout: the call was cut off at its deadline; the module is dead.
	wasmTimeout
	// wasmDead: the module trapped, exited, broke the interface or hit its
	// memory cap, in this call or an earlier one; the text says why.
	wasmDead
)

// wasmAPIVersion is the interface version the host implements (upstream's
// PluginPluginAPIVersion).
const wasmAPIVersion = 1

// wasmMethods are the Plugin service's methods and the functions a module
// exports for them, in upstream's order, which is also the order of the
// checks at load (abi.rs's METHODS).
var wasmMethods = [...][2]string{
	{"Configure", "plugin_configure"},
	{"Synchronize", "plugin_synchronize"},
	{"Shutdown", "plugin_shutdown"},
	{"RunPodSandbox", "plugin_run_pod_sandbox"},
	{"UpdatePodSandbox", "plugin_update_pod_sandbox"},
	{"PostUpdatePodSandbox", "plugin_post_update_pod_sandbox"},
	{"StopPodSandbox", "plugin_stop_pod_sandbox"},
	{"RemovePodSandbox", "plugin_remove_pod_sandbox"},
	{"CreateContainer", "plugin_create_container"},
	{"PostCreateContainer", "plugin_post_create_container"},
	{"StartContainer", "plugin_start_container"},
	{"PostStartContainer", "plugin_post_start_container"},
	{"UpdateContainer", "plugin_update_container"},
	{"PostUpdateContainer", "plugin_post_update_container"},
	{"StopContainer", "plugin_stop_container"},
	{"RemoveContainer", "plugin_remove_container"},
	{"StateChange", "plugin_state_change"},
	{"ValidateContainerAdjustment", "plugin_validate_container_adjustment"},
}

const (
	// wasmErrorBit marks a result whose bytes are an error text (bit 31
	// of its length).
	wasmErrorBit = 1 << 31
	// wasmLineLimit is the most of a standard output or error line kept
	// before it is logged anyway.
	wasmLineLimit = 4096
	wasmPageSize  = 65536
	// wasmDeadlineText is how lib.rs describes a call stopped at its
	// deadline, and so why such a module is dead.
	wasmDeadlineText = "interrupted at the call's deadline"
)

// wasmModule is one instance of a plugin module in a wazero runtime of its
// own, so that closing the runtime frees everything the module holds.
type wasmModule struct {
	mu      sync.Mutex
	runtime wazero.Runtime
	// release frees the module's memory if closing the runtime has not
	// (see wasmReserver).
	release func()
	memory  wapi.Memory
	malloc  wapi.Function
	free    wapi.Function
	methods map[string]wapi.Function
	// in is memory the module allocated for requests (inCap bytes), kept
	// from one call to the next (see exchange).
	in, inCap uint32
	// dead says why the module can no longer be called, once it cannot.
	dead string
}

// loadWasmModule compiles wasm, instantiates it with WASI and the host's
// log function, runs its _initialize within initTimeout and checks that it
// implements the interface. Its memory is capped at memoryLimit bytes. The
// errors are worded as lib.rs's LoadError displays them.
func loadWasmModule(name string, wasm []byte, memoryLimit uint64, initTimeout time.Duration) (*wasmModule, error) {
	pages := min(max(memoryLimit/wasmPageSize, 1), math.MaxUint16+1)
	// The memory's allocator is taken from the context the module is
	// instantiated with.
	allocator, release := wasmMemoryAllocator(pages * wasmPageSize)
	ctx := experimental.WithMemoryAllocator(context.Background(), allocator)
	// Closing on a done context is what cuts a call off at its deadline.
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().
		WithCloseOnContextDone(true).
		WithMemoryLimitPages(uint32(pages)))
	m, err := instantiateWasm(ctx, rt, name, wasm, initTimeout)
	if err != nil {
		_ = rt.Close(ctx)
		release()
		return nil, err
	}
	m.release = release
	return m, nil
}

func instantiateWasm(ctx context.Context, rt wazero.Runtime, name string, wasm []byte, initTimeout time.Duration) (*wasmModule, error) {
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		return nil, fmt.Errorf("WASM engine: %w", err)
	}
	if _, err := rt.NewHostModuleBuilder("env").
		NewFunctionBuilder().WithFunc(wasmLog).Export("log").
		Instantiate(ctx); err != nil {
		return nil, fmt.Errorf("WASM engine: %w", err)
	}
	compiled, err := rt.CompileModule(ctx, wasm)
	if err != nil {
		return nil, fmt.Errorf("compile: %w", err)
	}
	// What wasi.rs offers: no arguments, environment or files, but real
	// clocks and randomness (wazero's defaults are fixed fakes). The
	// module stays anonymous, so that no plugin name can clash with the
	// host modules'. _initialize is run below rather than as a start
	// function, to bound it by initTimeout and tell its failures apart.
	config := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions().
		WithStdout(&wasmOutput{prefix: "WASM plugin " + name + " stdout: "}).
		WithStderr(&wasmOutput{prefix: "WASM plugin " + name + " stderr: "}).
		WithSysWalltime().
		WithSysNanotime().
		WithRandSource(rand.Reader)
	mod, err := rt.InstantiateModule(ctx, compiled, config)
	if err != nil {
		return nil, fmt.Errorf("instantiate: %w", err)
	}
	exports := mod.ExportedFunctionDefinitions()
	if def, ok := exports["_initialize"]; ok {
		if why := wasmSignature(def, nil, nil); why != "" {
			return nil, fmt.Errorf("initialize: %s", why)
		}
		if _, err := wasmCall(ctx, initTimeout, mod.ExportedFunction("_initialize")); err != nil {
			var exit *sys.ExitError
			switch {
			// Exiting with 0 is a normal end of a start function (though
			// wazero has closed the module by then, and the check of
			// its version below fails).
			case errors.As(err, &exit) && exit.ExitCode() == 0:
			case errors.As(err, &exit) && !wasmTimedOut(err):
				return nil, fmt.Errorf("initialize: unexpected exit_code: %d", exit.ExitCode())
			default:
				return nil, fmt.Errorf("initialize: %s", describeWasmError(err))
			}
		}
	}
	m := &wasmModule{runtime: rt, methods: make(map[string]wapi.Function, len(wasmMethods))}
	if why := m.bind(ctx, initTimeout, mod, exports); why != "" {
		return nil, errors.New(why)
	}
	return m, nil
}

// bind finds the exports and checks the module's API version, in the order
// and with the texts of abi.rs's Exports::find (upstream's, for the
// missing ones): the first failure's text, or "".
func (m *wasmModule) bind(ctx context.Context, timeout time.Duration, mod wapi.Module, exports map[string]wapi.FunctionDefinition) string {
	const version = "plugin_api_version"
	i32, i64 := wapi.ValueTypeI32, wapi.ValueTypeI64
	def, ok := exports[version]
	if !ok {
		return version + " is not exported"
	}
	if wasmSignature(def, nil, []wapi.ValueType{i64}) != "" {
		return "invalid plugin_api_version signature"
	}
	res, err := wasmCall(ctx, timeout, mod.ExportedFunction(version))
	if err != nil {
		return version + ": " + describeWasmError(err)
	}
	if res[0] != wasmAPIVersion {
		return fmt.Sprintf("API version mismatch, host: %d, plugin: %d", wasmAPIVersion, res[0])
	}
	typed := func(name string, params, results []wapi.ValueType) (wapi.Function, string) {
		def, ok := exports[name]
		if !ok {
			return nil, name + " is not exported"
		}
		if why := wasmSignature(def, params, results); why != "" {
			return nil, name + ": " + why
		}
		return mod.ExportedFunction(name), ""
	}
	var why string
	for _, method := range wasmMethods {
		if m.methods[method[0]], why = typed(method[1], []wapi.ValueType{i32, i32}, []wapi.ValueType{i64}); why != "" {
			return why
		}
	}
	if m.malloc, why = typed("malloc", []wapi.ValueType{i32}, []wapi.ValueType{i32}); why != "" {
		return why
	}
	if m.free, why = typed("free", []wapi.ValueType{i32}, nil); why != "" {
		return why
	}
	if m.memory = mod.ExportedMemory("memory"); m.memory == nil {
		return "memory is not exported"
	}
	return ""
}

// wasmSignature is "" if def has these parameters and results, else
// wasmtime's text for a typed function that does not match.
func wasmSignature(def wapi.FunctionDefinition, params, results []wapi.ValueType) string {
	if !slices.Equal(def.ParamTypes(), params) {
		return "type mismatch with parameters"
	}
	if !slices.Equal(def.ResultTypes(), results) {
		return "type mismatch with results"
	}
	return ""
}

// wasmCall calls fn, cut off (and its module closed) after timeout.
func wasmCall(ctx context.Context, timeout time.Duration, fn wapi.Function, params ...uint64) ([]uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return fn.Call(ctx, params...)
}

// call calls method (a Plugin service method, such as "CreateContainer")
// with the request's encoding and returns what keep made of the reply's
// encoding, or why there is none. keep is given a view of the module's
// memory, valid only until it returns: bytes.Clone keeps a copy, and the
// core's callback copies the view into its reply instead, which spares the
// Go heap a copy of every reply. One call runs at a time; each waits for
// the one before.
func (m *wasmModule) call(method string, request []byte, timeout time.Duration, keep func(view []byte) []byte) ([]byte, wasmCallStatus, string) {
	fn := m.methods[method]
	if fn == nil {
		return nil, wasmDead, fmt.Sprintf("no WASM plugin method %q", method)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dead != "" {
		return nil, wasmDead, m.dead
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	reply, refused, err := m.exchange(ctx, fn, request, keep)
	switch {
	case err == nil && refused:
		return nil, wasmRefused, strings.ToValidUTF8(string(reply), "\uFFFD")
	case err == nil:
		return reply, wasmOK, ""
	}
	why := describeWasmError(err)
	m.die(why)
	if wasmTimedOut(err) {
		return nil, wasmTimeout, "WASM plugin call exceeded its deadline"
	}
	return nil, wasmDead, why
}

// exchange runs one request as upstream's host code does (and abi.rs's
// Exports::call): the request copied into memory the module allocated, the
// handler called, the reply kept (call's keep) and then freed. refused says
// the reply is the handler's error text, which is always copied.
//
// Unlike upstream's host, the request's memory is not freed after each
// call but kept for the next request that fits (requestBuffer). Each call
// of malloc or free is a call into the module, which wazero, closing
// modules on a done context, makes with a goroutine of its own watching
// that context: the module's malloc and free per request cost two such
// calls and the Go allocation in the module, for nothing the module can
// tell apart (the host owns the request's memory until it frees it).
func (m *wasmModule) exchange(ctx context.Context, fn wapi.Function, request []byte, keep func([]byte) []byte) (reply []byte, refused bool, err error) {
	if uint64(len(request)) > math.MaxUint32 {
		return nil, false, errors.New("request larger than a module's memory")
	}
	size := uint32(len(request))
	var (
		ptr  uint32
		kept bool
	)
	if size != 0 {
		if ptr, kept, err = m.requestBuffer(ctx, size); err != nil {
			return nil, false, err
		}
		if !m.memory.Write(ptr, request) {
			return nil, false, fmt.Errorf("Memory.Write(%d, %d) out of range of memory size %d", ptr, size, m.memory.Size())
		}
	}
	res, err := fn.Call(ctx, uint64(ptr), uint64(size))
	if err != nil {
		return nil, false, err
	}
	if ptr != 0 && !kept {
		if _, err := m.free.Call(ctx, uint64(ptr)); err != nil {
			return nil, false, err
		}
	}
	at, n := uint32(res[0]>>32), uint32(res[0])
	refused = n&wasmErrorBit != 0
	n &^= wasmErrorBit
	view, ok := m.memory.Read(at, n)
	if !ok {
		return nil, false, fmt.Errorf("Memory.Read(%d, %d) out of range of memory size %d", at, n, m.memory.Size())
	}
	// The view is the module's memory, which free may reuse.
	if refused {
		reply = bytes.Clone(view)
	} else {
		reply = keep(view)
	}
	if at != 0 {
		if _, err := m.free.Call(ctx, uint64(at)); err != nil {
			return nil, false, err
		}
	}
	return reply, refused, nil
}

// The least memory a module keeps for requests between calls, and the
// most: a larger request is given memory of its own, freed after its call.
// abi.rs keeps the same.
const (
	wasmRequestBufferMin = 16 << 10
	wasmRequestBufferMax = 1 << 20
)

// requestBuffer returns memory the module allocated for a request of size
// bytes, and whether it is kept for later requests (else the caller frees
// it after the call). A request larger than the memory kept replaces it
// with more: the next power of two, at least wasmRequestBufferMin.
func (m *wasmModule) requestBuffer(ctx context.Context, size uint32) (ptr uint32, kept bool, err error) {
	if size <= m.inCap {
		return m.in, true, nil
	}
	if size > wasmRequestBufferMax {
		return m.mallocOnce(ctx, size)
	}
	want := max(uint32(1)<<bits.Len32(size-1), wasmRequestBufferMin)
	if m.in != 0 {
		old := m.in
		m.in, m.inCap = 0, 0
		if _, err := m.free.Call(ctx, uint64(old)); err != nil {
			return 0, false, err
		}
	}
	res, err := m.malloc.Call(ctx, uint64(want))
	if err != nil {
		return 0, false, err
	}
	if res[0] == 0 {
		// No memory for the buffer (a module's malloc may answer 0): this
		// request gets what the module can give it, as upstream's would.
		return m.mallocOnce(ctx, size)
	}
	m.in, m.inCap = uint32(res[0]), want
	return m.in, true, nil
}

// mallocOnce allocates memory for one request, which is not kept.
func (m *wasmModule) mallocOnce(ctx context.Context, size uint32) (uint32, bool, error) {
	res, err := m.malloc.Call(ctx, uint64(size))
	if err != nil {
		return 0, false, err
	}
	return uint32(res[0]), false, nil
}

// die marks the module dead and frees what it holds at once: it is never
// called again, and a runaway module may hold its whole memory cap. No call
// is running (the caller holds mu), so none can touch the memory once it is
// unmapped.
func (m *wasmModule) die(why string) {
	m.dead = why
	_ = m.runtime.Close(context.Background())
	m.release()
}

// close closes the module's runtime. It waits for a call in progress, as
// wazero must not free a module's code while it runs.
func (m *wasmModule) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dead == "" {
		m.die("module closed")
	}
}

// wasmTimedOut says whether err is a call's end at its deadline.
func wasmTimedOut(err error) bool {
	var exit *sys.ExitError
	return errors.As(err, &exit) &&
		(exit.ExitCode() == sys.ExitCodeDeadlineExceeded || exit.ExitCode() == sys.ExitCodeContextCanceled)
}

// wasmtimeTraps are wasmtime's texts of the traps wazero words otherwise.
var wasmtimeTraps = map[string]string{
	"stack overflow":         "call stack exhausted",
	"unreachable":            "wasm `unreachable` instruction executed",
	"invalid table access":   "undefined element: out of bounds table access",
	"expected shared memory": "atomic wait on non-shared memory",
}

// describeWasmError words a failure as lib.rs's describe does: an exit as
// upstream (wazero) words it, a trap as wasmtime does. wazero's stack
// trace is left out, as lib.rs leaves out wasmtime's.
func describeWasmError(err error) string {
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		if wasmTimedOut(err) {
			return wasmDeadlineText
		}
		return fmt.Sprintf("module closed with exit_code(%d)", exit.ExitCode())
	}
	text, _, _ := strings.Cut(err.Error(), "\n")
	if trap, ok := strings.CutPrefix(text, "wasm error: "); ok {
		if t, ok := wasmtimeTraps[trap]; ok {
			trap = t
		}
		return "wasm trap: " + trap
	}
	// A host function's failure (wasmLog's panic).
	return strings.TrimSuffix(text, " (recovered by wazero)")
}

// wasmLog is the host's env.log: a LogRequest's message logged alone, at
// its level, as upstream does. A request outside memory, or one that does
// not decode, is the module breaking the interface: the panic fails the
// call.
func wasmLog(ctx context.Context, mod wapi.Module, ptr, size uint32) uint64 {
	mem := mod.ExportedMemory("memory")
	if mem == nil {
		panic(errors.New("no memory exported"))
	}
	b, ok := mem.Read(ptr, size)
	if !ok {
		panic(fmt.Errorf("Memory.Read(%d, %d) out of range", ptr, size))
	}
	req := &api.LogRequest{}
	if err := req.UnmarshalVT(b); err != nil {
		panic(fmt.Errorf("log request: %w", err))
	}
	switch req.GetLevel() {
	case api.LogRequest_LEVEL_INFO:
		log.Infof(ctx, "%s", req.GetMsg())
	case api.LogRequest_LEVEL_WARN:
		log.Warnf(ctx, "%s", req.GetMsg())
	case api.LogRequest_LEVEL_ERROR:
		log.Errorf(ctx, "%s", req.GetMsg())
	default:
		log.Debugf(ctx, "%s", req.GetMsg())
	}
	// The reply, an empty message, encodes to nothing: no pointer.
	return 0
}

// wasmOutput logs a module's standard output or error at debug level, a
// line at a time (upstream discards them; a Go plugin's panic message is
// worth having). A line longer than wasmLineLimit is logged in pieces.
type wasmOutput struct {
	prefix string
	line   []byte
}

func (o *wasmOutput) Write(p []byte) (int, error) {
	for _, b := range p {
		if b == '\n' || len(o.line) >= wasmLineLimit {
			log.Debugf(context.Background(), "%s%s", o.prefix, strings.ToValidUTF8(string(o.line), "\uFFFD"))
			o.line = o.line[:0]
			if b == '\n' {
				continue
			}
		}
		o.line = append(o.line, b)
	}
	return len(p), nil
}
