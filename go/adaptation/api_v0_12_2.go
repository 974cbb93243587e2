package adaptation

import "github.com/containerd/nri/pkg/api"

// Types that upstream pkg/api gained in NRI v0.12.2. A runtime on an older
// NRI builds without this file: see ../adaptation-files.sh.
type (
	Image = api.Image
)
