//go:build !cgo

package adaptation

// go/adaptation is cgo over include/nri.h and libnri.a; without cgo it would
// build without the functions that reach the core (or not at all), and the
// errors would not say why. Instead a build without cgo stops at this one
// undefined name, which says what is needed: CGO_ENABLED=1, and nri-rs
// installed where pkg-config finds it (link.go).
var _ = nri_rs_needs_cgo__set_CGO_ENABLED_1_and_link_libnri_a
