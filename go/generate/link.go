//go:build cgo && !nri_no_pkgconfig

package generate

// How this package finds nri-rs: through pkg-config, which reads nri.pc
// (installed by `make install`, or written into the build tree by `make
// pkgconfig`). nri.pc names nri.h's directory, libnri.a and the system
// libraries it needs. When pkg-config cannot find nri.pc, cgo stops with
// pkg-config's own message: install nri-rs or add the directory holding
// nri.pc to PKG_CONFIG_PATH. Builds without pkg-config use the
// nri_no_pkgconfig build tag instead (link_nopkgconfig.go).
//
// This package and its sibling (go/adaptation, go/generate) each carry these
// lines: go/adaptation is also built as upstream's pkg/adaptation through
// `go build -overlay`, where it can import nothing of nri-rs, so no shared
// package can hold them for both.

// #cgo pkg-config: nri
import "C"
