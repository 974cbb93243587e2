package adaptation

import "github.com/containerd/nri/pkg/api"

// Types and helpers that upstream pkg/api gained in NRI v0.11.0. A runtime
// on v0.10.x builds without this file: see ../adaptation-files.sh.
type (
	LinuxNetDevice       = api.LinuxNetDevice
	LinuxScheduler       = api.LinuxScheduler
	LinuxSchedulerPolicy = api.LinuxSchedulerPolicy
	LinuxSchedulerFlag   = api.LinuxSchedulerFlag
	LinuxRdt             = api.LinuxRdt
	User                 = api.User
)

var RepeatedString = api.RepeatedString
