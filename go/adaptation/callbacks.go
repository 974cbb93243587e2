package adaptation

// The Go side of the core's callbacks. Each runs on a thread of the Rust
// core, recovers its own panics (a Go panic must never unwind into Rust)
// and answers through the reply it was given.

/*
#include <stdint.h>
#include <stdlib.h>
#include "nri.h"
#include "shims.h"
*/
import "C"

import (
	"context"
	"fmt"
	"runtime"
	"runtime/cgo"
	"time"
	"unsafe"

	"github.com/containerd/nri/pkg/adaptation/builtin"
	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/log"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// runtimeCallbacks is what the core's sync and update callbacks reach. It
// is separate from Adaptation so the handle does not keep the Adaptation
// alive (its finalizer frees the core).
type runtimeCallbacks struct {
	syncFn   SyncFn
	updateFn UpdateFn
}

//export nriGoDeleteHandle
func nriGoDeleteHandle(h C.uintptr_t) {
	defer func() { _ = recover() }()
	cgo.Handle(h).Delete()
}

//export nriGoSync
func nriGoSync(h C.uintptr_t, cb *C.nri_sync_cb, reply *C.nri_reply) {
	raceIOSync()
	defer raceIOSync()
	defer recoverInto(reply, "SyncFn")
	r := handleValue(h).(*runtimeCallbacks)
	syncCB := func(_ context.Context, pods []*PodSandbox, containers []*Container) ([]*ContainerUpdate, error) {
		return syncStream(cb, pods, containers)
	}
	if err := r.syncFn(context.Background(), syncCB); err != nil {
		replyError(reply, err.Error())
	}
	letReadiedRun()
}

// letReadiedRun lets what the runtime's callback readied run before the
// callback returns to the core's thread. A goroutine readied on this
// thread's P (a channel send, a mutex handed over) waits in that P's queue,
// and returning to C keeps the P in a system call: the goroutine runs only
// once another P steals it or sysmon takes the P back, which in a quiet
// process is up to 10 ms later. When the core's other thread is in Go too
// (its log), no P is idle to steal it. Measured by make soak: the goroutine
// a sync callback woke ran 10-19 ms late after about one plugin restart in
// four, and never after this (docs/RELIABILITY.md). Only the callbacks that
// run the runtime's own code, which are rare, pay for the switch.
func letReadiedRun() {
	runtime.Gosched()
}

// syncState is the runtime's state while the core synchronizes plugins
// with it: each object's encoded size, given up front, and the objects,
// encoded a message at a time into the core's buffer as the core asks for
// them (nriGoSyncEncode), so that the whole state never exists encoded.
type syncState struct {
	pods       []*PodSandbox
	containers []*Container
	podSizes   []C.size_t
	ctrSizes   []C.size_t
}

func syncStream(cb *C.nri_sync_cb, pods []*PodSandbox, containers []*Container) ([]*ContainerUpdate, error) {
	s := &syncState{pods: pods, containers: containers,
		podSizes: make([]C.size_t, len(pods)), ctrSizes: make([]C.size_t, len(containers))}
	// proto.Size caches each message's size in it, which encoding reuses
	// (syncEncoding): the runtime holds its lock over its SyncCB, so the
	// objects do not change in between, as with upstream's own marshalling.
	for i, p := range pods {
		s.podSizes[i] = C.size_t(proto.Size(p))
	}
	for i, c := range containers {
		s.ctrSizes[i] = C.size_t(proto.Size(c))
	}
	h := cgo.NewHandle(s)
	defer h.Delete()
	var (
		buf  C.nri_buffer
		cerr *C.nri_error
	)
	raceIOSync()
	defer raceIOSync()
	st := C.nri_go_sync_stream(cb, sizesArg(s.podSizes), C.size_t(len(pods)),
		sizesArg(s.ctrSizes), C.size_t(len(containers)), C.uintptr_t(h), &buf, &cerr)
	if err := takeError(st, cerr); err != nil {
		return nil, err
	}
	rsp := &api.SynchronizeResponse{}
	if err := takeMessage(&buf, rsp); err != nil {
		return nil, err
	}
	return rsp.Update, nil
}

// sizesArg is the pointer C gets for a Go slice of sizes lent for one call.
func sizesArg(sizes []C.size_t) *C.size_t {
	if len(sizes) == 0 {
		return nil
	}
	return &sizes[0]
}

// syncEncoding encodes with the sizes syncStream had cached.
var syncEncoding = proto.MarshalOptions{UseCachedSize: true}

// nriGoSyncEncode writes the objects of one message to the core's n bytes
// at out.
//
//export nriGoSyncEncode
func nriGoSyncEncode(h C.uintptr_t, podsFrom, podsTo, ctrsFrom, ctrsTo C.size_t, out *C.uint8_t, n C.size_t, reply *C.nri_reply) {
	defer recoverInto(reply, "SyncCB")
	s := handleValue(h).(*syncState)
	// Appending within the capacity writes to the core's buffer; an
	// encoding longer than the sizes said would move to Go memory, and is
	// refused below.
	b := unsafe.Slice((*byte)(unsafe.Pointer(out)), int(n))[:0]
	var err error
	for i := podsFrom; i < podsTo && err == nil; i++ {
		b, err = appendField(b, syncPodsField, s.podSizes[i], s.pods[i])
	}
	for i := ctrsFrom; i < ctrsTo && err == nil; i++ {
		b, err = appendField(b, syncContainersField, s.ctrSizes[i], s.containers[i])
	}
	if err == nil && len(b) != int(n) {
		err = fmt.Errorf("%d bytes, not the %d of the sizes given", len(b), n)
	}
	if err != nil {
		replyError(reply, fmt.Sprintf("cannot encode the runtime's state: %v", err))
	}
}

// The SynchronizeRequest fields an object of the state is sent in.
const (
	syncPodsField       protowire.Number = 1
	syncContainersField protowire.Number = 2
)

// appendField appends m, whose encoding is size bytes, as field f.
func appendField(b []byte, f protowire.Number, size C.size_t, m proto.Message) ([]byte, error) {
	b = protowire.AppendTag(b, f, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(size))
	return syncEncoding.MarshalAppend(b, m)
}

//export nriGoUpdate
func nriGoUpdate(h C.uintptr_t, req *C.uint8_t, n C.size_t, reply *C.nri_reply) {
	raceIOSync()
	defer raceIOSync()
	defer recoverInto(reply, "UpdateFn")
	r := handleValue(h).(*runtimeCallbacks)
	in := &api.UpdateContainersRequest{}
	if err := unmarshalC(req, n, in); err != nil {
		replyError(reply, err.Error())
		return
	}
	failed, err := r.updateFn(context.Background(), in.Update)
	replyWith(reply, &api.UpdateContainersResponse{Failed: failed}, err)
	letReadiedRun()
}

// builtinOps decodes a builtin plugin request and calls the matching method
// of upstream's builtin.BuiltinPlugin, which also does upstream's
// defaulting (e.g. events derived from the handlers that are set). The
// events without a response are in builtinStateOps, which depends on the
// NRI release (builtin_v0_12_0.go).
var builtinOps = map[C.uint32_t]func(context.Context, *builtin.BuiltinPlugin, []byte) (proto.Message, error){
	C.NRI_BUILTIN_OP_CONFIGURE:          builtinCall((*builtin.BuiltinPlugin).Configure),
	C.NRI_BUILTIN_OP_SYNCHRONIZE:        builtinCall((*builtin.BuiltinPlugin).Synchronize),
	C.NRI_BUILTIN_OP_UPDATE_POD_SANDBOX: builtinCall((*builtin.BuiltinPlugin).UpdatePodSandbox),
	C.NRI_BUILTIN_OP_CREATE_CONTAINER:   builtinCall((*builtin.BuiltinPlugin).CreateContainer),
	C.NRI_BUILTIN_OP_UPDATE_CONTAINER:   builtinCall((*builtin.BuiltinPlugin).UpdateContainer),
	C.NRI_BUILTIN_OP_STOP_CONTAINER:     builtinCall((*builtin.BuiltinPlugin).StopContainer),
	C.NRI_BUILTIN_OP_VALIDATE_CONTAINER_ADJUSTMENT: func(ctx context.Context, b *builtin.BuiltinPlugin, in []byte) (proto.Message, error) {
		req := &api.ValidateContainerAdjustmentRequest{}
		if err := proto.Unmarshal(in, req); err != nil {
			return nil, err
		}
		rsp, err := b.ValidateContainerAdjustment(ctx, req)
		if err == nil && rsp.GetReject() {
			err = fmt.Errorf("%s", rsp.GetReason())
		}
		return nil, err
	},
}

// builtinCall adapts a BuiltinPlugin event method, whatever its request
// and response types, to the table above.
func builtinCall[Req any, Rsp proto.Message, PReq interface {
	*Req
	proto.Message
}](method func(*builtin.BuiltinPlugin, context.Context, PReq) (Rsp, error)) func(context.Context, *builtin.BuiltinPlugin, []byte) (proto.Message, error) {
	return func(ctx context.Context, b *builtin.BuiltinPlugin, in []byte) (proto.Message, error) {
		req := PReq(new(Req))
		if err := proto.Unmarshal(in, req); err != nil {
			return nil, err
		}
		return method(b, ctx, req)
	}
}

//export nriGoBuiltin
func nriGoBuiltin(h C.uintptr_t, op C.uint32_t, req *C.uint8_t, n C.size_t, reply *C.nri_reply) {
	raceIOSync()
	defer raceIOSync()
	defer recoverInto(reply, "builtin plugin")
	b := handleValue(h).(*builtin.BuiltinPlugin)
	call, ok := builtinOps[op]
	if !ok {
		call, ok = builtinStateOps[op]
	}
	if !ok {
		replyError(reply, fmt.Sprintf("builtin plugin %s-%s: unknown request %d", b.Index, b.Base, op))
		return
	}
	// The request is decoded straight from the core's memory, valid for
	// the duration of this callback (see unmarshalC).
	rsp, err := call(context.Background(), b, cBytes(req, n))
	replyWith(reply, rsp, err)
}

//export nriGoInvocation
func nriGoInvocation(h C.uintptr_t, plugin, op, cerr *C.char) {
	raceIOSync()
	defer raceIOSync()
	defer func() { _ = recover() }()
	var err error
	if cerr != nil {
		err = fmt.Errorf("%s", C.GoString(cerr))
	}
	handleValue(h).(Metrics).RecordPluginInvocation(C.GoString(plugin), C.GoString(op), err)
}

//export nriGoLatency
func nriGoLatency(h C.uintptr_t, plugin, op *C.char, nanos C.uint64_t) {
	raceIOSync()
	defer raceIOSync()
	defer func() { _ = recover() }()
	handleValue(h).(Metrics).RecordPluginLatency(C.GoString(plugin), C.GoString(op), time.Duration(nanos))
}

//export nriGoAdjustments
func nriGoAdjustments(h C.uintptr_t, plugin, op *C.char, adj *C.uint8_t, n C.size_t, updates, evicts C.size_t) {
	raceIOSync()
	defer raceIOSync()
	defer func() { _ = recover() }()
	var adjust *ContainerAdjustment
	if adj != nil {
		adjust = &ContainerAdjustment{}
		if err := unmarshalC(adj, n, adjust); err != nil {
			adjust = nil
		}
	}
	handleValue(h).(Metrics).RecordPluginAdjustments(C.GoString(plugin), C.GoString(op), adjust, int(updates), int(evicts))
}

//export nriGoPluginCount
func nriGoPluginCount(h C.uintptr_t, count C.size_t) {
	raceIOSync()
	defer raceIOSync()
	defer func() { _ = recover() }()
	handleValue(h).(Metrics).UpdatePluginCount(int(count))
}

//export nriGoDeprecation
func nriGoDeprecation(h C.uintptr_t, d C.uint32_t, plugin, details *C.char) {
	raceIOSync()
	defer raceIOSync()
	defer func() { _ = recover() }()
	handleValue(h).(DeprecationRecorder).PluginWarning(context.Background(), Deprecation(d), C.GoString(plugin), C.GoString(details))
}

//export nriGoAudit
func nriGoAudit(h C.uintptr_t, json *C.char, n C.size_t) {
	raceIOSync()
	defer raceIOSync()
	defer func() { _ = recover() }()
	handleValue(h).(AuditFunc)(C.GoBytes(unsafe.Pointer(json), C.int(n)))
}

//export nriGoLog
func nriGoLog(level C.uint32_t, target, message *C.char) {
	defer func() { _ = recover() }()
	msg := C.GoString(message)
	switch level {
	case C.NRI_LOG_LEVEL_ERROR:
		log.Errorf(noCtx, "%s", msg)
	case C.NRI_LOG_LEVEL_WARN:
		log.Warnf(noCtx, "%s", msg)
	case C.NRI_LOG_LEVEL_INFO:
		log.Infof(noCtx, "%s", msg)
	default:
		log.Debugf(noCtx, "%s", msg)
	}
}
