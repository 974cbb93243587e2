package adaptation

// The boundary to the Rust core (include/nri.h). Go values never cross it
// as pointers: each callback target travels as a cgo.Handle stored in a
// small C allocation (so C holds a plain integer, never Go memory), and the
// finalizer the core runs when it is done with it deletes the handle.
//
// Build: pkg-config finds nri.h and libnri.a through nri.pc (`make install`
// writes it; inside this repository `make build` does); link.go holds the
// link line, link_nopkgconfig.go the one for builds without pkg-config,
// nocgo.go what a build without cgo says.

/*
#include <stdint.h>
#include <stdlib.h>
#include "nri.h"
*/
import "C"

import (
	"context"
	"fmt"
	"runtime"
	"runtime/cgo"
	"sync"
	"unsafe"

	"github.com/containerd/ttrpc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// nriError is an error reported by the Rust core: its status and message,
// the plugin at fault, and the error upstream's would wrap, if there is
// one (see takeError).
type nriError struct {
	status C.nri_status
	msg    string
	plugin string
	cause  error
}

func (e *nriError) Error() string { return e.msg }

// Unwrap gives errors.Is and errors.As the error upstream's wraps.
func (e *nriError) Unwrap() error { return e.cause }

// coreError is what the core's error object says, read out of it: the
// fields Go's error is built from. The message is only shown, never read:
// rewording it in the core changes no answer errors.Is or status.Code
// gives.
type coreError struct {
	status       C.nri_status
	msg          string
	plugin       string
	cause        C.nri_cause
	code         int32
	causeMessage string
	isCallError  bool
}

// readError copies what the core's error object says.
func readError(cerr *C.nri_error) coreError {
	return coreError{
		status:       C.nri_error_status(cerr),
		msg:          C.GoString(C.nri_error_message(cerr)),
		plugin:       C.GoString(C.nri_error_plugin(cerr)),
		cause:        C.nri_error_cause(cerr),
		code:         int32(C.nri_error_code(cerr)),
		causeMessage: C.GoString(C.nri_error_cause_message(cerr)),
		isCallError:  bool(C.nri_error_is_call_error(cerr)),
	}
}

// goError is the Go error of a failure the core reported. A plugin call's
// error is upstream's error value for it: context.DeadlineExceeded for a
// plugin that timed out, ttrpc.ErrClosed for a lost connection, the
// status a plugin failed with. When the failure is that call's error
// itself (a plugin failed an event), it is returned as is, as upstream
// does; otherwise it is wrapped (since v0.12.4 upstream wraps the call of
// a validator that failed, and of a plugin whose failure policy fails the
// request), so errors.Is and status.FromError find it. A rejection by a
// validator wraps nothing, as upstream's does not.
func goError(e coreError) error {
	var cause error
	switch e.cause {
	case C.NRI_CAUSE_DEADLINE_EXCEEDED:
		cause = context.DeadlineExceeded
	case C.NRI_CAUSE_CLOSED:
		cause = ttrpc.ErrClosed
	case C.NRI_CAUSE_STATUS:
		cause = grpcstatus.Error(codes.Code(e.code), e.causeMessage)
	}
	if cause != nil && e.isCallError {
		return cause
	}
	return &nriError{status: e.status, msg: e.msg, plugin: e.plugin, cause: cause}
}

// takeError turns a status and the core's error object into a Go error,
// releasing the object.
func takeError(status C.nri_status, cerr *C.nri_error) error {
	if status == C.NRI_STATUS_OK {
		return nil
	}
	if cerr == nil {
		return &nriError{status: status, msg: C.GoString(C.nri_status_name(C.uint32_t(status)))}
	}
	defer C.nri_error_free(cerr)
	return goError(readError(cerr))
}

// handleValue is the Go value a callback's handle stands for. Built with
// the nri_debug_gc tag (debug_gc.go), it collects garbage first: a Go value
// that the core still uses but that nothing keeps alive (a missing
// runtime.KeepAlive after a C call) is then finalized at once, and a test
// fails, where in a daemon it would fail only when a collection happened
// to fall at that moment.
func handleValue(h C.uintptr_t) any {
	if debugGC {
		runtime.GC()
	}
	return cgo.Handle(h).Value()
}

// bytesArg is the pointer C gets for a Go byte slice lent for one call.
func bytesArg(b []byte) (*C.uint8_t, C.size_t) {
	if len(b) == 0 {
		return nil, 0
	}
	return (*C.uint8_t)(unsafe.Pointer(&b[0])), C.size_t(len(b))
}

// Marshal buffers are reused: a CreateContainerRequest is ~7 KB, and a
// fresh buffer per event was most of the bytes the boundary allocated.
// Lending a pooled buffer to C is safe because the core never keeps it:
// every export that takes request bytes is done with them when it returns.
// It decodes them (crates/nri-capi/src/buffer.rs decode_raw) or copies them
// (nri_reply_set_data) before returning. Buffers that grew past
// maxPooledBuffer (a large request) are left to the GC rather than kept
// alive by the pool.
const maxPooledBuffer = 256 << 10

var bufferPool = sync.Pool{New: func() any { return new([]byte) }}

// vtMarshaler is what upstream's pkg/api generates for each message with
// vtprotobuf (api_vtproto.pb.go, in every release this package builds
// against): an encoder without reflection.
type vtMarshaler interface {
	SizeVT() int
	MarshalToSizedBufferVT(dAtA []byte) (int, error)
}

// vtUnmarshaler is vtprotobuf's decoder. UnmarshalVT copies every string,
// bytes and unknown field out of its input (only UnmarshalVTUnsafe
// aliases it), as proto.Unmarshal does.
type vtUnmarshaler interface {
	UnmarshalVT(dAtA []byte) error
}

// marshal encodes msg into a pooled buffer, *bp. The bytes stay valid
// until releaseBuffer(bp), which the caller must call, also on error,
// once the C call that reads them has returned.
//
// pkg/api's messages are encoded with their vtprotobuf code, as
// upstream's WASM host encodes them: for a typical CreateContainerRequest
// (7 KB) it takes a fifth of proto.Marshal's time and allocates nothing,
// where proto.Marshal allocates ~110 times (PERFORMANCE.md). The encoding
// is the same; what vtprotobuf skips is the check that strings are UTF-8,
// which the core makes when it decodes the request (buffer.rs decode), so
// such a request still fails, with the core's error.
func marshal(msg proto.Message) (bp *[]byte, err error) {
	bp = bufferPool.Get().(*[]byte)
	vt, ok := msg.(vtMarshaler)
	if !ok {
		*bp, err = proto.MarshalOptions{}.MarshalAppend((*bp)[:0], msg)
		return bp, err
	}
	n := vt.SizeVT()
	if cap(*bp) < n {
		*bp = make([]byte, n)
	}
	*bp = (*bp)[:n]
	_, err = vt.MarshalToSizedBufferVT(*bp)
	return bp, err
}

// releaseBuffer returns a buffer from marshal to the pool.
func releaseBuffer(bp *[]byte) {
	if cap(*bp) <= maxPooledBuffer {
		*bp = (*bp)[:0]
		bufferPool.Put(bp)
	}
}

// cBytes views C memory without copying it. The view is valid only while
// the C memory is: for a buffer, until it is freed; for a callback's
// argument, until the callback returns.
func cBytes(p *C.uint8_t, n C.size_t) []byte {
	if p == nil || n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(p)), int(n))
}

// unmarshalC decodes msg straight from C memory, without copying it into
// Go memory first. This is safe because the result never aliases its
// input: UnmarshalVT (see vtUnmarshaler) and proto.Unmarshal copy every
// string, bytes field and unknown field out of the buffer (for
// proto.Unmarshal, only the internal flag protoiface.UnmarshalAliasBuffer,
// which proto.UnmarshalOptions never sets, would let it keep references;
// see proto/decode.go and internal/impl of google.golang.org/protobuf).
// TestUnmarshalKeepsNoReferenceToInput checks this. The core's bytes are
// rust-protobuf's encoding, whose strings are UTF-8 by construction, so
// vtprotobuf not checking them loses nothing.
func unmarshalC(p *C.uint8_t, n C.size_t, msg proto.Message) error {
	return unmarshal(cBytes(p, n), msg)
}

// unmarshal decodes b into msg, replacing what msg held, as proto.Unmarshal
// does (UnmarshalVT alone would merge).
func unmarshal(b []byte, msg proto.Message) error {
	if vt, ok := msg.(vtUnmarshaler); ok {
		proto.Reset(msg)
		return vt.UnmarshalVT(b)
	}
	return proto.Unmarshal(b, msg)
}

// takeMessage decodes an owned core buffer into msg and releases it.
func takeMessage(buf *C.nri_buffer, msg proto.Message) error {
	defer C.nri_buffer_free(buf)
	return unmarshalC(buf.data, buf.len, msg)
}

// replyWith sets a callback's reply: the error, or the encoded message.
// nri_reply_set_data copies the bytes, so the buffer is reused.
func replyWith(reply *C.nri_reply, msg proto.Message, err error) {
	if err == nil && msg != nil {
		bp, merr := marshal(msg)
		defer releaseBuffer(bp)
		if err = merr; err == nil {
			p, n := bytesArg(*bp)
			C.nri_reply_set_data(reply, p, n)
			return
		}
	}
	if err != nil {
		replyError(reply, err.Error())
	}
}

func replyError(reply *C.nri_reply, msg string) {
	cmsg := C.CString(msg)
	defer C.free(unsafe.Pointer(cmsg))
	C.nri_reply_set_error(reply, cmsg)
}

// recoverInto turns a panic in a callback into the callback's error, so it
// never unwinds into Rust.
func recoverInto(reply *C.nri_reply, what string) {
	if p := recover(); p != nil {
		if reply != nil {
			replyError(reply, fmt.Sprintf("panic in %s: %v", what, p))
		}
	}
}
