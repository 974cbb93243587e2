//go:build cgo && nri_no_pkgconfig

package adaptation

// With the nri_no_pkgconfig build tag, this package links libnri.a and
// the system libraries nri.pc would name, and CGO_CFLAGS (-I, where nri.h
// is) and CGO_LDFLAGS (-L, where libnri.a is) must find them. The list is
// nri.pc's (crates/nri-capi/nri.pc.in; tests/c/check-static-libs.sh keeps
// the Makefile's copy in step with what rustc names).

// #cgo LDFLAGS: -lnri -lutil -lrt -lpthread -lm -ldl -lc
import "C"
