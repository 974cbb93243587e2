package adaptation

/*
#include <stdint.h>
#include "nri.h"
*/
import "C"

import (
	"context"

	"github.com/containerd/nri/pkg/adaptation/builtin"
	"google.golang.org/protobuf/proto"
)

// builtinStateOps are the builtin plugin's events without a response. From
// NRI v0.12.0 on each has a method of its own; before, they all went
// through StateChange (_before_v0_12_0).
var builtinStateOps = map[C.uint32_t]func(context.Context, *builtin.BuiltinPlugin, []byte) (proto.Message, error){
	C.NRI_BUILTIN_OP_RUN_POD_SANDBOX:         builtinCall((*builtin.BuiltinPlugin).RunPodSandbox),
	C.NRI_BUILTIN_OP_POST_UPDATE_POD_SANDBOX: builtinCall((*builtin.BuiltinPlugin).PostUpdatePodSandbox),
	C.NRI_BUILTIN_OP_STOP_POD_SANDBOX:        builtinCall((*builtin.BuiltinPlugin).StopPodSandbox),
	C.NRI_BUILTIN_OP_REMOVE_POD_SANDBOX:      builtinCall((*builtin.BuiltinPlugin).RemovePodSandbox),
	C.NRI_BUILTIN_OP_POST_CREATE_CONTAINER:   builtinCall((*builtin.BuiltinPlugin).PostCreateContainer),
	C.NRI_BUILTIN_OP_START_CONTAINER:         builtinCall((*builtin.BuiltinPlugin).StartContainer),
	C.NRI_BUILTIN_OP_POST_START_CONTAINER:    builtinCall((*builtin.BuiltinPlugin).PostStartContainer),
	C.NRI_BUILTIN_OP_POST_UPDATE_CONTAINER:   builtinCall((*builtin.BuiltinPlugin).PostUpdateContainer),
	C.NRI_BUILTIN_OP_REMOVE_CONTAINER:        builtinCall((*builtin.BuiltinPlugin).RemoveContainer),
}
