//go:build !race && !nri_no_wasm

// The race detector makes wazero's compiler take minutes per module, so
// this file is left out of -race builds (go/tests/wasm skips itself for the
// same reason).

package adaptation

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	wapi "github.com/tetratelabs/wazero/api"
	"google.golang.org/protobuf/proto"
)

const (
	wasmTestMemory  = 512 << 20
	wasmTestInit    = 30 * time.Second
	wasmTestTimeout = time.Second
)

// wasmTestPlugin builds go/tests/wasm's plugin for wasip1, as that
// package's tests do.
func wasmTestPlugin(t *testing.T) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "plugin.wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", out, "./plugin")
	cmd.Dir = filepath.Join("..", "tests", "wasm")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the WASM plugin: %v\n%s", err, msg)
	}
	wasm, err := os.ReadFile(out)
	require.NoError(t, err)
	return wasm
}

func wasmEncode(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	require.NoError(t, err)
	return b
}

func wasmConfigure(t *testing.T, m *wasmModule, config string) {
	t.Helper()
	req := wasmEncode(t, &api.ConfigureRequest{Config: config, RuntimeName: "engine-test", RuntimeVersion: "v1"})
	reply, status, text := m.call("Configure", req, wasmTestTimeout, bytes.Clone)
	require.Equal(t, wasmOK, status, text)
	rsp := &api.ConfigureResponse{}
	require.NoError(t, proto.Unmarshal(reply, rsp))
	assert.NotZero(t, rsp.GetEvents())
}

func wasmCreate(m *wasmModule) ([]byte, wasmCallStatus, string) {
	return wasmCreateNamed(m, "ctr")
}

func wasmCreateNamed(m *wasmModule, name string) ([]byte, wasmCallStatus, string) {
	req, _ := proto.Marshal(&api.CreateContainerRequest{
		Pod:       &api.PodSandbox{Id: "pod0", Name: "pod"},
		Container: &api.Container{Id: "ctr0", PodSandboxId: "pod0", Name: name},
	})
	return m.call("CreateContainer", req, wasmTestTimeout, bytes.Clone)
}

// countedWasmCalls is a module's function that counts its calls.
type countedWasmCalls struct {
	wapi.Function
	calls *int
}

func (f countedWasmCalls) Call(ctx context.Context, params ...uint64) ([]uint64, error) {
	*f.calls++
	return f.Function.Call(ctx, params...)
}

func TestWasmEngine(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles a Go WASM module")
	}
	rec := RecordLog(t)

	wasm := wasmTestPlugin(t)
	// Every plugin but the first ends dead: one module each.
	load := func(t *testing.T, limit uint64) *wasmModule {
		m, err := loadWasmModule("10-engine", wasm, limit, wasmTestInit)
		require.NoError(t, err)
		t.Cleanup(m.close)
		return m
	}

	t.Run("calls", func(t *testing.T) {
		m := load(t, wasmTestMemory)
		wasmConfigure(t, m, "name=engine")
		// Through the host's log function, at the request's level.
		assert.True(t, rec.Has("wasm-test engine Configure engine-test/v1 mode=adjust"), "%v", rec)

		reply, status, text := wasmCreate(m)
		require.Equal(t, wasmOK, status, text)
		rsp := &api.CreateContainerResponse{}
		require.NoError(t, proto.Unmarshal(reply, rsp))
		assert.Equal(t, "events=1", rsp.GetAdjust().GetAnnotations()["wasm-test/engine"])

		// An empty request is no pointer at all.
		reply, status, text = m.call("Shutdown", nil, wasmTestTimeout, bytes.Clone)
		require.Equal(t, wasmOK, status, text)
		assert.Empty(t, reply)

		_, status, text = m.call("Bogus", nil, wasmTestTimeout, bytes.Clone)
		assert.Equal(t, wasmDead, status)
		assert.Equal(t, `no WASM plugin method "Bogus"`, text)

		// A handler's error, which leaves the module alive.
		wasmConfigure(t, m, "name=engine mode=error")
		_, status, text = wasmCreate(m)
		assert.Equal(t, wasmRefused, status)
		assert.Equal(t, "wasm-test: refusing to create ctr", text)
		wasmConfigure(t, m, "name=engine")

		m.close()
		m.close()
		_, status, text = wasmCreate(m)
		assert.Equal(t, wasmDead, status)
		assert.Equal(t, "module closed", text)
	})

	// The memory the module allocates for requests is kept for those that
	// fit (exchange), and each arrives whole: the plugin answers with the
	// container's name in an environment variable.
	t.Run("requests", func(t *testing.T) {
		m := load(t, wasmTestMemory)
		wasmConfigure(t, m, "name=engine quiet=1")
		var mallocs, frees int
		m.malloc = countedWasmCalls{m.malloc, &mallocs}
		m.free = countedWasmCalls{m.free, &frees}
		// Configure's request left 16 KiB allocated. Every call frees its
		// reply.
		for i, step := range []struct{ name, mallocs, frees int }{
			{10, 0, 1},             // the 16 KiB, kept
			{10, 0, 2},             // the same memory
			{20_000, 1, 4},         // replaced by 32 KiB
			{(1 << 20) + 10, 2, 6}, // over 1 MiB: memory of its own, freed
			{10, 2, 7},             // the 32 KiB kept
		} {
			name := strings.Repeat(string(rune('a'+i)), step.name)
			reply, status, text := wasmCreateNamed(m, name)
			require.Equal(t, wasmOK, status, text)
			rsp := &api.CreateContainerResponse{}
			require.NoError(t, proto.Unmarshal(reply, rsp))
			var got string
			for _, e := range rsp.GetAdjust().GetEnv() {
				if e.GetKey() == "WASM_TEST_ENGINE" {
					got = e.GetValue()
				}
			}
			assert.True(t, got == name, "request %d: the plugin saw a name of %d bytes, not %d", i, len(got), len(name))
			assert.Equal(t, []int{step.mallocs, step.frees}, []int{mallocs, frees}, "request %d", i)
		}
	})

	t.Run("loop", func(t *testing.T) {
		m := load(t, wasmTestMemory)
		wasmConfigure(t, m, "mode=loop")
		started := time.Now()
		_, status, text := wasmCreate(m)
		took := time.Since(started)
		assert.Equal(t, wasmTimeout, status, text)
		assert.Less(t, took, wasmTestTimeout+2*time.Second)
		assert.GreaterOrEqual(t, took, wasmTestTimeout)

		started = time.Now()
		_, status, text = m.call("Shutdown", nil, wasmTestTimeout, bytes.Clone)
		assert.Equal(t, wasmDead, status)
		assert.Equal(t, "interrupted at the call's deadline", text)
		assert.Less(t, time.Since(started), wasmTestTimeout/10)
	})

	// A Go module's runtime ends a panic, or memory.grow refused at the
	// cap, with an unreachable instruction (GOTRACEBACK=crash, the default
	// of a library build).
	const crashed = "wasm trap: wasm `unreachable` instruction executed"
	for _, tc := range []struct{ mode, why string }{
		{"trap", "wasm trap: out of bounds memory access"},
		{"panic", crashed},
		{"alloc", crashed},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			m := load(t, 128<<20)
			wasmConfigure(t, m, "mode="+tc.mode)
			_, status, text := wasmCreate(m)
			assert.Equal(t, wasmDead, status)
			assert.Equal(t, tc.why, text)
			_, status, again := wasmCreate(m)
			assert.Equal(t, wasmDead, status)
			assert.Equal(t, text, again)
		})
	}
	// The panic's message, through the module's standard error.
	assert.True(t, rec.Has("WASM plugin 10-engine stderr: panic: wasm-test: panicking in CreateContainer"), "%v", rec)
}

// wasmTestModule assembles a module of one function: its types (with their
// count), its imports (with theirs; nil for none), the type of the
// function, the name it is exported as and its code.
func wasmTestModule(types, imports []byte, typ byte, export string, code ...byte) []byte {
	section := func(id byte, content ...byte) []byte {
		return append([]byte{id, byte(len(content))}, content...)
	}
	m := append([]byte("\x00asm\x01\x00\x00\x00"), section(1, types...)...)
	index := byte(0)
	if imports != nil {
		m = append(m, section(2, imports...)...)
		index = imports[0]
	}
	m = append(m, section(3, 1, typ)...)
	m = append(m, section(7, append(append([]byte{1, byte(len(export))}, export...), 0, index)...)...)
	return append(m, section(10, append([]byte{1, byte(len(code) + 1), 0}, code...)...)...)
}

// Modules that are not plugins fail at load, with lib.rs's texts.
func TestWasmEngineLoadErrors(t *testing.T) {
	var (
		// () -> i64, () -> ().
		types = []byte{2, 0x60, 0, 1, 0x7e, 0x60, 0, 0}
		// (i32) -> (), () -> ().
		exitTypes = []byte{2, 0x60, 1, 0x7f, 0, 0x60, 0, 0}
		// wasi_snapshot_preview1.proc_exit, of type 0.
		procExit = append(append([]byte{1, 22}, "wasi_snapshot_preview1"...), "\x09proc_exit\x00\x00"...)
		// env.spawn, of type 0.
		spawn = append([]byte{1, 3}, "env\x05spawn\x00\x00"...)
	)
	for _, tc := range []struct {
		name, err string
		wasm      []byte
	}{
		{"garbage", "compile: ", []byte("not a WASM module")},
		{"empty", "plugin_api_version is not exported", []byte("\x00asm\x01\x00\x00\x00")},
		{"version", "API version mismatch, host: 1, plugin: 2",
			wasmTestModule(types, nil, 0, "plugin_api_version", 0x42, 2, 0x0b)},
		{"signature", "invalid plugin_api_version signature",
			wasmTestModule(types, nil, 1, "plugin_api_version", 0x0b)},
		{"no methods", "plugin_configure is not exported",
			wasmTestModule(types, nil, 0, "plugin_api_version", 0x42, 1, 0x0b)},
		{"init loops", "initialize: interrupted at the call's deadline",
			wasmTestModule(types, nil, 1, "_initialize", 0x03, 0x40, 0x0c, 0, 0x0b, 0x0b)},
		{"init exits", "initialize: unexpected exit_code: 3",
			wasmTestModule(exitTypes, procExit, 1, "_initialize", 0x41, 3, 0x10, 0, 0x0b)},
		{"unknown import", "instantiate: ",
			wasmTestModule(exitTypes, spawn, 1, "_initialize", 0x0b)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			started := time.Now()
			m, err := loadWasmModule("10-bad", tc.wasm, wasmTestMemory, 200*time.Millisecond)
			require.Error(t, err)
			t.Log(err)
			assert.Nil(t, m)
			assert.True(t, strings.HasPrefix(err.Error(), tc.err), "%v", err)
			assert.Less(t, time.Since(started), 5*time.Second)
		})
	}
}

// The memory allocator reserves up to the cap, or the module's own lower
// maximum, and grows in place.
func TestWasmEngineMemory(t *testing.T) {
	const page = wasmPageSize
	allocator, release := wasmMemoryAllocator(4 * page)
	if allocator == nil {
		t.Skip("wazero's own allocator on this platform")
	}
	defer release()

	// No maximum of its own: wazero passes the cap.
	mem := allocator.Allocate(page, 4*page)
	b := mem.Reallocate(page)
	require.Len(t, b, page)
	assert.Equal(t, page, cap(b))
	b[page-1] = 7
	grown := mem.Reallocate(4 * page)
	require.Len(t, grown, 4*page)
	assert.Same(t, &b[0], &grown[0], "a grow must not move the memory")
	assert.Equal(t, byte(7), grown[page-1])
	assert.Zero(t, grown[4*page-1])
	assert.Nil(t, mem.Reallocate(5*page), "a grow past the cap")

	// A maximum under the cap bounds the reservation.
	small := allocator.Allocate(0, 2*page)
	assert.Empty(t, small.Reallocate(0))
	assert.Len(t, small.Reallocate(2*page), 2*page)
	assert.Nil(t, small.Reallocate(3*page))

	// A maximum of 0 pages needs no mapping.
	empty := allocator.Allocate(0, 0)
	assert.Empty(t, empty.Reallocate(0))
	assert.Nil(t, empty.Reallocate(page))

	// Freed by wazero, then by release (deferred), then again: once.
	mem.Free()
	mem.Free()
	assert.Nil(t, mem.Reallocate(page))
	release()
	assert.Nil(t, small.Reallocate(page))
}
