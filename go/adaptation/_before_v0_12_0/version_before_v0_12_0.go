package adaptation

import "runtime/debug"

// runtimeNRIVersion is the NRI release the runtime was built with, as
// build info records it (a replacement's version first, as pkg/version of
// v0.12 does). Runtimes of NRI before v0.12.0 told plugins no version at
// all; nri-rs tells them this one, and "0.0.0-unknown", pkg/version's
// word for it, when build info has none.
func runtimeNRIVersion() string {
	const unknown = "0.0.0-unknown"
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return unknown
	}
	for _, dep := range info.Deps {
		if dep.Path != "github.com/containerd/nri" {
			continue
		}
		if dep.Replace != nil && dep.Replace.Version != "" && dep.Replace.Version != "(devel)" {
			return dep.Replace.Version
		}
		if dep.Version != "" && dep.Version != "(devel)" {
			return dep.Version
		}
	}
	return unknown
}
