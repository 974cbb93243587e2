package generate

// What go/generate links: libnri.a and the native libraries rustc names for
// it (tests/c/check-static-libs.sh keeps the list in step with the Makefile's
// NRI_NATIVE_LIBS). This file is the one place this package names them.
// CGO_LDFLAGS supplies the directory of libnri.a (-L), CGO_CFLAGS the one
// of nri.h (-I).
//
// go/adaptation and go/generate each carry this line: go/adaptation is also
// built as upstream's pkg/adaptation through `go build -overlay`, where it
// can import nothing of nri-rs, so no package can hold it for both.

// #cgo LDFLAGS: -lnri -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc
import "C"
