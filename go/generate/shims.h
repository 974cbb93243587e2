// Declarations of shims.c, for the Go files of this package.
#ifndef NRI_GO_SPEC_SHIMS_H
#define NRI_GO_SPEC_SHIMS_H

#include <stdint.h>
#include "nri.h"

// A core spec generator whose callbacks (bits of `use`, see cgo.go) reach
// the Go call behind handle `h`; NULL if it cannot be set up.
nri_spec_generator *nri_go_spec_generator(uintptr_t h, uint32_t use);

#endif
