package adaptation

import "github.com/containerd/nri/pkg/api"

// Types that upstream pkg/adaptation exports from NRI v0.12.4 on. A
// runtime on an older NRI builds without this file: see
// ../adaptation-files.sh.
type (
	// FailurePolicy is a plugin's failure policy, as plugins declare it in
	// Configure; the core honours it for every plugin.
	FailurePolicy = api.FailurePolicy
)
