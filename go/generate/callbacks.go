package generate

// The Go side of the core's spec generator callbacks. They run on the
// goroutine that called into the core, during that call. A panic is
// recovered (it must never unwind into Rust), the call fails, and the
// panic is raised again once the call is back in Go, as upstream's would
// have reached the caller.

/*
#include <stdint.h>
#include <stdlib.h>
#include "nri.h"
*/
import "C"

import (
	"encoding/json"
	"fmt"
	"runtime/cgo"
	"unsafe"

	nri "github.com/containerd/nri/pkg/api"
	rspec "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// serve runs a callback's body for the call behind h and answers reply
// with the body's value as JSON, or with its error.
func serve(h C.uintptr_t, reply *C.nri_reply, body func(c *callbacks) (any, error)) {
	var c *callbacks
	defer func() {
		if p := recover(); p != nil {
			if c != nil && !c.didPanic {
				c.didPanic, c.panicked = true, p
			}
			replyError(reply, fmt.Sprintf("panic in a spec generator callback: %v", p))
		}
	}()
	c = cgo.Handle(h).Value().(*callbacks)
	answer, err := body(c)
	if err == nil {
		var data []byte
		if data, err = json.Marshal(answer); err == nil {
			p, n := bytesArg(data)
			C.nri_reply_set_data(reply, p, n)
			return
		}
	}
	if c.err == nil {
		c.err = err
	}
	replyError(reply, err.Error())
}

func replyError(reply *C.nri_reply, msg string) {
	cmsg := C.CString(msg)
	defer C.free(unsafe.Pointer(cmsg))
	C.nri_reply_set_error(reply, cmsg)
}

// goBytes copies C memory lent to a callback.
func goBytes(p *C.uint8_t, n C.size_t) []byte {
	if p == nil || n == 0 {
		return nil
	}
	return C.GoBytes(unsafe.Pointer(p), C.int(n))
}

//export nriGoSpecFilterAnnotations
func nriGoSpecFilterAnnotations(h C.uintptr_t, data *C.uint8_t, n C.size_t, reply *C.nri_reply) {
	serve(h, reply, func(c *callbacks) (any, error) {
		var annotations map[string]string
		if err := json.Unmarshal(goBytes(data, n), &annotations); err != nil {
			return nil, err
		}
		return c.filterAnnotations(annotations)
	})
}

//export nriGoSpecResolveBlockIO
func nriGoSpecResolveBlockIO(h C.uintptr_t, class *C.char, reply *C.nri_reply) {
	serve(h, reply, func(c *callbacks) (any, error) {
		return c.resolveBlockIO(C.GoString(class))
	})
}

//export nriGoSpecResolveRdt
func nriGoSpecResolveRdt(h C.uintptr_t, class *C.char, reply *C.nri_reply) {
	serve(h, reply, func(c *callbacks) (any, error) {
		return c.resolveRdt(C.GoString(class))
	})
}

//export nriGoSpecCheckResources
func nriGoSpecCheckResources(h C.uintptr_t, data *C.uint8_t, n C.size_t, reply *C.nri_reply) {
	serve(h, reply, func(c *callbacks) (any, error) {
		var r *rspec.LinuxResources
		if err := json.Unmarshal(goBytes(data, n), &r); err != nil {
			return nil, err
		}
		return r, c.checkResources(r)
	})
}

// nriGoSpecInjectCDIDevices hands the injector g.Config itself, as upstream
// does, filled with the spec as adjusted so far; the call puts the old
// Config back if it fails.
//
//export nriGoSpecInjectCDIDevices
func nriGoSpecInjectCDIDevices(h C.uintptr_t, spec *C.uint8_t, n C.size_t, names **C.char, count C.size_t, reply *C.nri_reply) {
	serve(h, reply, func(c *callbacks) (any, error) {
		config := c.g.Config
		if c.saved == nil {
			saved := *config
			c.saved = &saved
		}
		*config = rspec.Spec{}
		if err := json.Unmarshal(goBytes(spec, n), config); err != nil {
			return nil, err
		}
		devices := make([]string, 0, count)
		for _, name := range unsafe.Slice(names, count) {
			devices = append(devices, C.GoString(name))
		}
		if err := c.injectCDIDevices(config, devices); err != nil {
			c.injector = true
			return nil, err
		}
		return config, nil
	})
}

// withoutNil is msg without nil entries in its lists and maps, which
// protobuf would send as empty messages (an empty mount, device, ...).
// Upstream skips some nil entries and panics on the others; here they are
// all skipped, except a nil net device under a removal key, which still
// removes. msg itself is returned when it has none.
func withoutNil(msg proto.Message) proto.Message {
	m := msg.ProtoReflect()
	if !hasNil(m) {
		return msg
	}
	return copyWithoutNil(m).Interface()
}

func hasNil(m protoreflect.Message) bool {
	found := false
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if !holdsMessages(fd) {
			return true
		}
		switch {
		case fd.IsList():
			for i := range v.List().Len() {
				e := v.List().Get(i).Message()
				found = found || !e.IsValid() || hasNil(e)
			}
		case fd.IsMap():
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				found = found || !mv.Message().IsValid() || hasNil(mv.Message())
				return !found
			})
		default:
			found = hasNil(v.Message())
		}
		return !found
	})
	return found
}

func copyWithoutNil(src protoreflect.Message) protoreflect.Message {
	dst := src.New()
	src.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case !holdsMessages(fd):
			dst.Set(fd, v)
		case fd.IsList():
			list := dst.Mutable(fd).List()
			for i := range v.List().Len() {
				if e := v.List().Get(i).Message(); e.IsValid() {
					list.Append(protoreflect.ValueOfMessage(copyWithoutNil(e)))
				}
			}
		case fd.IsMap():
			dstMap := dst.Mutable(fd).Map()
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				switch e := mv.Message(); {
				case e.IsValid():
					dstMap.Set(k, protoreflect.ValueOfMessage(copyWithoutNil(e)))
				case isMarked(k.String()):
					dstMap.Set(k, dstMap.NewValue())
				}
				return true
			})
		default:
			dst.Set(fd, protoreflect.ValueOfMessage(copyWithoutNil(v.Message())))
		}
		return true
	})
	return dst
}

// holdsMessages: a message field, or a list or map of messages.
func holdsMessages(fd protoreflect.FieldDescriptor) bool {
	if fd.IsMap() {
		return fd.MapValue().Message() != nil
	}
	return fd.Message() != nil
}

func isMarked(key string) bool {
	_, marked := nri.IsMarkedForRemoval(key)
	return marked
}
