package generate

// The boundary to the Rust spec generator (include/nri.h). Each call
// creates a core generator, sets the callbacks it needs and frees it
// afterwards. The Go state of the call (the callbacks, what they hit)
// crosses as a cgo.Handle cast to the callbacks' user data, so C only ever
// holds an integer; the handle is deleted when the call returns.
//
// Build: pkg-config finds nri.h and libnri.a through nri.pc (`make install`
// writes it; inside this repository `make build` does); link.go holds the
// link line, link_nopkgconfig.go the one for builds without pkg-config,
// nocgo.go what a build without cgo says.

/*
#include <stdint.h>
#include <stdlib.h>
#include "nri.h"
#include "shims.h"
*/
import "C"

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/cgo"
	"unsafe"

	nri "github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/log"
	rspec "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/protobuf/proto"
)

// Which of the generator's callbacks a call uses (bits of shims.h's use
// argument).
const (
	useAnnotationFilter = 1 << iota
	useBlockIOResolver
	useRdtResolver
	useResourceChecker
	useCDIInjector

	useAll = useAnnotationFilter | useBlockIOResolver | useRdtResolver | useResourceChecker | useCDIInjector
)

// callbacks are the Go functions one call into the core may reach, and
// what became of them.
type callbacks struct {
	g                 *Generator
	filterAnnotations func(map[string]string) (map[string]string, error)
	resolveBlockIO    func(string) (*rspec.LinuxBlockIO, error)
	resolveRdt        func(string) (*rspec.LinuxIntelRdt, error)
	checkResources    func(*rspec.LinuxResources) error
	injectCDIDevices  func(*rspec.Spec, []string) error

	err      error // the first error a callback returned
	injector bool  // err came from the CDI injector
	panicked any   // a callback's panic, raised again once back in Go
	didPanic bool
	saved    *rspec.Spec // g.Config before the CDI injector changed it
}

// callbacks selects the generator's callbacks that are set, of `use`.
func (g *Generator) callbacks(use uint) *callbacks {
	c := &callbacks{g: g}
	if use&useAnnotationFilter != 0 {
		c.filterAnnotations = g.filterAnnotations
	}
	if use&useBlockIOResolver != 0 {
		c.resolveBlockIO = g.resolveBlockIO
	}
	if use&useRdtResolver != 0 {
		c.resolveRdt = g.resolveRdt
	}
	if use&useResourceChecker != 0 {
		c.checkResources = g.checkResources
	}
	if use&useCDIInjector != 0 {
		c.injectCDIDevices = g.injectCDIDevices
	}
	return c
}

func (c *callbacks) mask() C.uint32_t {
	var m C.uint32_t
	if c.filterAnnotations != nil {
		m |= useAnnotationFilter
	}
	if c.resolveBlockIO != nil {
		m |= useBlockIOResolver
	}
	if c.resolveRdt != nil {
		m |= useRdtResolver
	}
	if c.checkResources != nil {
		m |= useResourceChecker
	}
	if c.injectCDIDevices != nil {
		m |= useCDIInjector
	}
	return m
}

// adjust applies an adjustment to g.Config through the core.
func (g *Generator) adjust(adjust *nri.ContainerAdjustment, cbs *callbacks) error {
	msg, err := proto.Marshal(withoutNil(adjust))
	if err != nil {
		return fmt.Errorf("cannot marshal the adjustment: %w", err)
	}
	err = g.call(cbs, msg, func(gen *C.nri_spec_generator, spec, m *C.uint8_t, sn, mn C.size_t, out *C.nri_buffer, cerr **C.nri_error) C.nri_status {
		return C.nri_spec_adjust(gen, spec, sn, m, mn, out, nil, cerr)
	})
	if err == nil && len(adjust.GetEnv()) > 0 {
		g.syncEnv()
	}
	return err
}

// update applies resources to g.Config through the core.
func (g *Generator) update(r *nri.LinuxResources, cbs *callbacks) error {
	msg, err := proto.Marshal(withoutNil(r))
	if err != nil {
		return fmt.Errorf("cannot marshal the resources: %w", err)
	}
	return g.call(cbs, msg, func(gen *C.nri_spec_generator, spec, m *C.uint8_t, sn, mn C.size_t, out *C.nri_buffer, cerr **C.nri_error) C.nri_status {
		return C.nri_spec_update_resources(gen, spec, sn, m, mn, out, cerr)
	})
}

type coreCall func(gen *C.nri_spec_generator, spec, msg *C.uint8_t, specLen, msgLen C.size_t, out *C.nri_buffer, err **C.nri_error) C.nri_status

// call runs one core call on g.Config and msg, and replaces *g.Config
// with the result on success.
func (g *Generator) call(cbs *callbacks, msg []byte, fn coreCall) error {
	if cbs == nil {
		cbs = &callbacks{g: g}
	}
	spec, err := json.Marshal(g.spec())
	if err != nil {
		return fmt.Errorf("cannot marshal the OCI Spec: %w", err)
	}

	h := cgo.NewHandle(cbs)
	defer h.Delete()
	gen := C.nri_go_spec_generator(C.uintptr_t(h), cbs.mask())
	if gen == nil {
		return fmt.Errorf("nri-rs: cannot set up the spec generator")
	}
	defer C.nri_spec_generator_free(gen)

	var (
		out  C.nri_buffer
		cerr *C.nri_error
	)
	sp, sn := bytesArg(spec)
	mp, mn := bytesArg(msg)
	st := fn(gen, sp, mp, sn, mn, &out, &cerr)
	runtime.KeepAlive(spec)
	runtime.KeepAlive(msg)

	if st != C.NRI_STATUS_OK {
		if cbs.saved != nil {
			*g.Config = *cbs.saved
		}
		err := cbs.failure(st, cerr)
		if cbs.didPanic {
			panic(cbs.panicked)
		}
		return err
	}
	var next rspec.Spec
	if err := json.Unmarshal(takeBuffer(&out), &next); err != nil {
		if cbs.saved != nil {
			*g.Config = *cbs.saved
		}
		return fmt.Errorf("nri-rs returned an unreadable OCI Spec: %w", err)
	}
	*g.Config = next
	return nil
}

// coreError is a failure reported by the Rust core.
type coreError struct {
	status C.nri_status
	msg    string
}

func (e *coreError) Error() string { return e.msg }

// callbackError is the core's message for a callback's error (upstream's
// text), wrapping that error.
type callbackError struct {
	msg string
	err error
}

func (e *callbackError) Error() string { return e.msg }
func (e *callbackError) Unwrap() error { return e.err }

// failure is the error of a failed call, releasing the core's error.
func (c *callbacks) failure(st C.nri_status, cerr *C.nri_error) error {
	msg := C.GoString(C.nri_status_name(C.uint32_t(st)))
	if cerr != nil {
		st, msg = C.nri_error_status(cerr), C.GoString(C.nri_error_message(cerr))
		C.nri_error_free(cerr)
	}
	switch {
	case st != C.NRI_STATUS_CALLBACK_FAILED || c.err == nil:
		return &coreError{status: st, msg: msg}
	case c.injector:
		return c.err // upstream passes the injector's error through
	default:
		return &callbackError{msg: msg, err: c.err}
	}
}

func logRefused(err error) {
	log.Errorf(context.Background(), "nri-rs: adjustment not applied to the OCI Spec: %v", err)
}

// bytesArg is the pointer C gets for a Go byte slice lent for one call.
func bytesArg(b []byte) (*C.uint8_t, C.size_t) {
	if len(b) == 0 {
		return nil, 0
	}
	return (*C.uint8_t)(unsafe.Pointer(&b[0])), C.size_t(len(b))
}

// takeBuffer copies an owned core buffer into Go memory and releases it.
func takeBuffer(buf *C.nri_buffer) []byte {
	defer C.nri_buffer_free(buf)
	if buf.data == nil {
		return nil
	}
	return C.GoBytes(unsafe.Pointer(buf.data), C.int(buf.len))
}
