// C shims between nri.h and the Go callbacks of this package: they give
// the core callbacks with nri.h's exact types, and keep the cgo.Handle of
// a Go callback target in a small C allocation, so C only ever holds an
// integer (never Go memory).

#include <stdint.h>
#include <stdlib.h>
#include "nri.h"
#include "shims.h"
#include "_cgo_export.h"


static uintptr_t handle_of(void *ud) { return *(uintptr_t *)ud; }

static void *nri_go_user_data(uintptr_t h) {
	uintptr_t *p = malloc(sizeof *p);
	if (p == NULL) abort(); /* out of memory: nothing sane to hand the core */
	*p = h;
	return p;
}

static void nri_go_free_user_data(void *ud) {
	nriGoDeleteHandle(handle_of(ud));
	free(ud);
}

static void nri_go_sync(void *ud, nri_sync_cb *cb, nri_reply *reply) {
	nriGoSync(handle_of(ud), cb, reply);
}

/* The encoder's user data is the handle itself: it lives only for the
 * nri_sync_cb_stream call it is given to. */
static void nri_go_sync_encode(void *ud, size_t pods_from, size_t pods_to,
                               size_t containers_from, size_t containers_to,
                               uint8_t *out, size_t len, nri_reply *reply) {
	nriGoSyncEncode((uintptr_t)ud, pods_from, pods_to, containers_from, containers_to, out, len, reply);
}

nri_status nri_go_sync_stream(nri_sync_cb *cb, const size_t *pod_sizes, size_t pods,
                              const size_t *container_sizes, size_t containers, uintptr_t h,
                              nri_buffer *updates, nri_error **err) {
	return nri_sync_cb_stream(cb, pod_sizes, pods, container_sizes, containers,
	                          nri_go_sync_encode, (void *)h, updates, err);
}

static void nri_go_update(void *ud, const uint8_t *req, size_t len, nri_reply *reply) {
	nriGoUpdate(handle_of(ud), (uint8_t *)req, len, reply);
}

static void nri_go_builtin(void *ud, nri_builtin_op op, const uint8_t *req, size_t len, nri_reply *reply) {
	nriGoBuiltin(handle_of(ud), (uint32_t)op, (uint8_t *)req, len, reply);
}

static void nri_go_invocation(void *ud, const char *plugin, const char *op, const char *err) {
	nriGoInvocation(handle_of(ud), (char *)plugin, (char *)op, (char *)err);
}

static void nri_go_latency(void *ud, const char *plugin, const char *op, uint64_t nanos) {
	nriGoLatency(handle_of(ud), (char *)plugin, (char *)op, nanos);
}

static void nri_go_adjustments(void *ud, const char *plugin, const char *op, const uint8_t *adj, size_t len, size_t updates, size_t evicts) {
	nriGoAdjustments(handle_of(ud), (char *)plugin, (char *)op, (uint8_t *)adj, len, updates, evicts);
}

static void nri_go_plugin_count(void *ud, size_t count) {
	nriGoPluginCount(handle_of(ud), count);
}

static void nri_go_deprecation(void *ud, nri_deprecation d, const char *plugin, const char *details) {
	nriGoDeprecation(handle_of(ud), (uint32_t)d, (char *)plugin, (char *)details);
}

static void nri_go_audit(void *ud, const char *json, size_t len) {
	nriGoAudit(handle_of(ud), (char *)json, len);
}

static void nri_go_log(void *ud, nri_log_level level, const char *target, const char *message) {
	(void)ud;
	nriGoLog((uint32_t)level, (char *)target, (char *)message);
}

nri_callbacks nri_go_callbacks(uintptr_t h) {
	nri_callbacks c = {
		.sync = nri_go_sync,
		.update = nri_go_update,
		.user_data = nri_go_user_data(h),
		.free_user_data = nri_go_free_user_data,
	};
	return c;
}

nri_status nri_go_add_builtin(nri_options *o, const char *name, const char *index, uintptr_t h, nri_error **err) {
	nri_builtin_plugin p = {
		.name = name,
		.index = index,
		.events = 0,
		.handle = nri_go_builtin,
		.user_data = nri_go_user_data(h),
		.free_user_data = nri_go_free_user_data,
	};
	return nri_options_add_builtin_plugin(o, &p, err);
}

nri_status nri_go_set_metrics(nri_options *o, uintptr_t h, nri_error **err) {
	nri_metrics m = {
		.invocation = nri_go_invocation,
		.latency = nri_go_latency,
		.adjustments = nri_go_adjustments,
		.plugin_count = nri_go_plugin_count,
		.user_data = nri_go_user_data(h),
		.free_user_data = nri_go_free_user_data,
	};
	return nri_options_set_metrics(o, &m, err);
}

nri_status nri_go_set_deprecation(nri_options *o, uintptr_t h, nri_error **err) {
	return nri_options_set_deprecation_recorder(o, nri_go_deprecation, nri_go_user_data(h), nri_go_free_user_data, err);
}

nri_status nri_go_set_audit(nri_options *o, uintptr_t h, nri_error **err) {
	return nri_options_set_audit_callback(o, nri_go_audit, nri_go_user_data(h), nri_go_free_user_data, err);
}

nri_status nri_go_set_log(uint32_t max_level, nri_error **err) {
	return nri_set_log_callback(nri_go_log, NULL, max_level, err);
}

#ifdef NRI_GO_WASM /* wasm_lend.go's, which a build with nri_no_wasm leaves out */
static void nri_go_wasm_load(void *ud, const char *name, const uint8_t *wasm, size_t len,
                             uint64_t memory_limit, uint64_t init_timeout_ns, void **module,
                             nri_reply *reply) {
	uintptr_t m = 0;
	nriGoWasmLoad(handle_of(ud), (char *)name, (uint8_t *)wasm, len, memory_limit, init_timeout_ns, &m, reply);
	*module = (void *)m;
}

static uint32_t nri_go_wasm_call(void *ud, void *module, const char *method, const uint8_t *req,
                                 size_t len, uint64_t timeout_ns, nri_reply *reply) {
	return nriGoWasmCall(handle_of(ud), (uintptr_t)module, (char *)method, (uint8_t *)req, len, timeout_ns, reply);
}

static void nri_go_wasm_release(void *ud, void *module) {
	nriGoWasmRelease(handle_of(ud), (uintptr_t)module);
}

nri_status nri_go_set_wasm_engine(nri_options *o, uintptr_t h, nri_error **err) {
	nri_wasm_engine e = {
		.load = nri_go_wasm_load,
		.call = nri_go_wasm_call,
		.release = nri_go_wasm_release,
		.user_data = nri_go_user_data(h),
		.free_user_data = nri_go_free_user_data,
	};
	return nri_options_set_wasm_engine(o, &e, err);
}
#endif
