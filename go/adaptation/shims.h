// Declarations of shims.c, for the Go files of this package.
#ifndef NRI_GO_SHIMS_H
#define NRI_GO_SHIMS_H

#include <stdint.h>
#include "nri.h"

nri_callbacks nri_go_callbacks(uintptr_t h);
nri_status nri_go_add_builtin(nri_options *o, const char *name, const char *index, uintptr_t h, nri_error **err);
nri_status nri_go_set_metrics(nri_options *o, uintptr_t h, nri_error **err);
nri_status nri_go_set_deprecation(nri_options *o, uintptr_t h, nri_error **err);
nri_status nri_go_set_audit(nri_options *o, uintptr_t h, nri_error **err);
nri_status nri_go_sync_stream(nri_sync_cb *cb, const size_t *pod_sizes, size_t pods,
                               const size_t *container_sizes, size_t containers, uintptr_t h,
                               nri_buffer *updates, nri_error **err);
nri_status nri_go_set_wasm_engine(nri_options *o, uintptr_t h, nri_error **err);
nri_status nri_go_set_log(uint32_t max_level, nri_error **err);

#endif
