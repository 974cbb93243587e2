package adaptation

import nriver "github.com/containerd/nri/pkg/version"

// runtimeNRIVersion is the NRI release the runtime was built with, which
// plugins are told in Configure. Upstream's pkg/version, which finds it,
// is new in v0.12.0; _before_v0_12_0 finds it without.
func runtimeNRIVersion() string {
	return nriver.GetFromBuildInfo()
}
