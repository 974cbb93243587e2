package adaptation

/*
#include "nri.h"
*/
import "C"

import (
	"github.com/containerd/nri/pkg/api"
	"google.golang.org/protobuf/proto"
)

// Events no plugin would see are answered here, without encoding the
// request or crossing into the core: with no plugin interested, upstream
// costs next to nothing per event, and runtimes call NRI for every pod and
// container operation whether plugins are installed or not. The answers
// are the core's own for an event no plugin sees (skip_test.go checks
// them against the core).

// skips says whether no plugin would see event ev now. The core answers
// with one atomic load, taken as one instant: running, with no plugin
// subscribed to ev (for CreateContainer: and no validator). When not
// running, it says no, so that the core reports why.
func (r *Adaptation) skips(ev api.Event) bool {
	return r.core != nil && !bool(C.nri_adaptation_wants_event(r.core, C.int32_t(ev)))
}

// answerSkipped sets rsp, a fresh response, to the core's answer for an
// event no plugin saw. UpdatePodSandbox and StopContainer answer empty;
// CreateContainer answers an adjustment with every part present and empty;
// UpdateContainer answers the target's (empty) update, last and only.
func answerSkipped(rsp proto.Message) {
	switch rsp := rsp.(type) {
	case *CreateContainerResponse:
		rsp.Adjust = &ContainerAdjustment{
			Hooks: &Hooks{},
			Linux: &LinuxContainerAdjustment{
				Resources: &LinuxResources{
					Memory: &LinuxMemory{},
					Cpu:    &LinuxCPU{},
				},
			},
		}
	case *UpdateContainerResponse:
		rsp.Update = []*ContainerUpdate{{}}
	}
}
