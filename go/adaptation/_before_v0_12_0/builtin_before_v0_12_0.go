package adaptation

/*
#include <stdint.h>
#include "nri.h"
*/
import "C"

import (
	"context"

	"github.com/containerd/nri/pkg/adaptation/builtin"
	"github.com/containerd/nri/pkg/api"
	"google.golang.org/protobuf/proto"
)

// builtinStateOps are the builtin plugin's events without a response.
// Before NRI v0.12.0 a builtin plugin took them all through StateChange,
// except PostUpdatePodSandbox, which had a method of its own.
var builtinStateOps = map[C.uint32_t]func(context.Context, *builtin.BuiltinPlugin, []byte) (proto.Message, error){
	C.NRI_BUILTIN_OP_RUN_POD_SANDBOX:         builtinStateChange(api.Event_RUN_POD_SANDBOX),
	C.NRI_BUILTIN_OP_POST_UPDATE_POD_SANDBOX: builtinStateChange(api.Event_POST_UPDATE_POD_SANDBOX),
	C.NRI_BUILTIN_OP_STOP_POD_SANDBOX:        builtinStateChange(api.Event_STOP_POD_SANDBOX),
	C.NRI_BUILTIN_OP_REMOVE_POD_SANDBOX:      builtinStateChange(api.Event_REMOVE_POD_SANDBOX),
	C.NRI_BUILTIN_OP_POST_CREATE_CONTAINER:   builtinStateChange(api.Event_POST_CREATE_CONTAINER),
	C.NRI_BUILTIN_OP_START_CONTAINER:         builtinStateChange(api.Event_START_CONTAINER),
	C.NRI_BUILTIN_OP_POST_START_CONTAINER:    builtinStateChange(api.Event_POST_START_CONTAINER),
	C.NRI_BUILTIN_OP_POST_UPDATE_CONTAINER:   builtinStateChange(api.Event_POST_UPDATE_CONTAINER),
	C.NRI_BUILTIN_OP_REMOVE_CONTAINER:        builtinStateChange(api.Event_REMOVE_CONTAINER),
}

func builtinStateChange(ev api.Event) func(context.Context, *builtin.BuiltinPlugin, []byte) (proto.Message, error) {
	return func(ctx context.Context, b *builtin.BuiltinPlugin, in []byte) (proto.Message, error) {
		evt, err := decodeStateEvent(ev, in)
		if err != nil {
			return nil, err
		}
		if ev == api.Event_POST_UPDATE_POD_SANDBOX {
			return nil, b.PostUpdatePodSandbox(ctx, evt)
		}
		_, err = b.StateChange(ctx, evt)
		return nil, err
	}
}
