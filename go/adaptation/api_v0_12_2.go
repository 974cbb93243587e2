package adaptation

import "github.com/containerd/nri/pkg/api"

// Types that upstream pkg/api gained in NRI v0.12.2. A runtime on an older
// NRI (CRI-O pins v0.12.0) leaves this file out of its `go build -overlay`;
// tests/conformance/build-against.sh does the same.
type (
	Image = api.Image
)
