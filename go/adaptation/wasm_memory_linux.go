//go:build linux && !nri_no_wasm

package adaptation

// The linear memories of WASM modules, reserved whole up front.
//
// wazero's own allocator keeps a module's memory in a Go []byte and grows
// it by appending, so a module that grows its memory step by step has it
// copied again and again: quadratic in time, and every old copy stays
// resident until the garbage collector gets to it. A Go module growing to
// its cap in 16 MiB steps ran into its call's deadline before reaching the
// cap and left the runtime's process with some 1.5 GiB of such garbage.
// Reserving the cap's worth of address space once instead, and letting the
// memory grow inside it, makes a grow a change of length: nothing is
// copied, nothing becomes garbage, and only the pages the module touches
// are resident.

import (
	"math"
	"sync"
	"syscall"

	"github.com/tetratelabs/wazero/experimental"
)

// wasmMemoryAllocator returns the allocator for the memory of a module
// capped at limit bytes (a whole number of pages) and a function that
// frees whatever memory it handed out and wazero has not freed yet. The
// engine calls that function once the runtime is closed, when no code of
// the module can run any more.
func wasmMemoryAllocator(limit uint64) (experimental.MemoryAllocator, func()) {
	a := &wasmReserver{limit: limit}
	return a, a.release
}

// wasmReserver hands out one reservation per linear memory (a plugin
// module has one) and remembers them all. wazero frees a memory when it
// closes the module, except when it closes it from another goroutine at a
// call's deadline: it then leaves the freeing to the next call of the
// module, and takes the module off the list its runtime's Close goes
// through. A Go []byte would be collected all the same; a mapping would
// stay for the life of the process, so release frees it.
type wasmReserver struct {
	limit uint64
	mu    sync.Mutex
	made  []experimental.LinearMemory
}

// Allocate reserves the memory's largest size at once. wazero passes as
// max the module's declared maximum, lowered to the cap if above it, or the
// cap if the module declares none, and refuses a grow past that maximum
// before it asks for more memory; so a module that declares a maximum
// under the cap gets a reservation of just that. The reservation is
// bounded by the cap all the same, so that it never outgrows the cap
// whatever wazero passes. The suggested capacity is of no use here: there
// is nothing to amortise.
func (a *wasmReserver) Allocate(_, max uint64) experimental.LinearMemory {
	var mem experimental.LinearMemory
	if m := wasmReserve(min(a.limit, max)); m != nil {
		mem = m
	} else {
		// A reservation the platform refuses (an address space too
		// small for the cap, as on 32-bit systems, or a kernel that
		// counts reserved memory as committed) must not keep the module
		// from running: it gets memory from the Go heap, as with
		// wazero's own allocator. wazero has no way to fail here: a
		// memory that cannot be given its initial size panics.
		mem = &wasmHeapMemory{}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.made = append(a.made, mem)
	return mem
}

func (a *wasmReserver) release() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, mem := range a.made {
		mem.Free()
	}
	a.made = nil
}

// wasmMapping is a memory in an anonymous private mapping of its largest
// size. The mapping is made with MAP_NORESERVE: pages the module never
// touches cost neither memory nor commit charge, and they read as zeros,
// which is what WASM requires of memory a grow adds.
type wasmMapping struct {
	mu sync.Mutex
	// mapped is the whole reservation, nil once freed.
	mapped []byte
}

// wasmReserve maps size bytes, or returns nil if it cannot. An empty
// memory (a module that declares a maximum of 0 pages) needs no mapping,
// and mmap refuses a length of 0 anyway.
func wasmReserve(size uint64) *wasmMapping {
	if size == 0 {
		return &wasmMapping{mapped: []byte{}}
	}
	if size > math.MaxInt {
		return nil
	}
	mapped, err := syscall.Mmap(-1, 0, int(size),
		syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS|syscall.MAP_NORESERVE)
	if err != nil {
		return nil
	}
	return &wasmMapping{mapped: mapped}
}

// Reallocate gives the memory its new size within the reservation, at the
// same address, so a grow copies nothing. Beyond the reservation, or once
// freed, it returns nil: wazero then refuses the grow, as a module may
// expect memory.grow to be refused. The slice's capacity is its length, so
// that no one appending to a view of the memory can write past its end
// into the rest of the reservation.
func (m *wasmMapping) Reallocate(size uint64) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mapped == nil || size > uint64(len(m.mapped)) {
		return nil
	}
	return m.mapped[:size:size]
}

// Free unmaps the reservation, once: wazero and release may both free the
// same memory, and unmapping twice could take away an address range that
// has been mapped again for something else in between.
func (m *wasmMapping) Free() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mapped == nil {
		return
	}
	if len(m.mapped) != 0 {
		// Munmap fails only on a range that is not a mapping's, which
		// this one is until now; there is nothing to do about it.
		_ = syscall.Munmap(m.mapped)
	}
	m.mapped = nil
}

// wasmHeapMemory is a memory in the Go heap, for when no reservation can
// be made: it grows as wazero's own memories do, copying when it must.
type wasmHeapMemory struct {
	buf []byte
}

func (m *wasmHeapMemory) Reallocate(size uint64) []byte {
	if size > math.MaxInt {
		return nil
	}
	if n := int(size); n > len(m.buf) {
		// The new bytes must be zeros: append's are.
		m.buf = append(m.buf, make([]byte, n-len(m.buf))...)
	}
	return m.buf
}

func (m *wasmHeapMemory) Free() {
	m.buf = nil
}
