package adaptation

import "github.com/containerd/nri/pkg/api"

// Types that upstream pkg/api gained in NRI v0.12.0. A runtime on an older
// NRI (CRI-O v1.36 pins v0.11.0) builds without this file: see
// ../adaptation-files.sh.
type (
	LinuxMemoryPolicy = api.LinuxMemoryPolicy
)
