package adaptation

import "github.com/containerd/nri/pkg/api"

// Types that upstream pkg/adaptation exports from NRI v0.12.4 on. A
// runtime on an older NRI leaves this file out of its `go build -overlay`
// (tests/e2e/overlay.sh); tests/conformance/build-against.sh does the same.
type (
	// FailurePolicy is a plugin's failure policy, as plugins declare it in
	// Configure; the core honours it for every plugin.
	FailurePolicy = api.FailurePolicy
)
