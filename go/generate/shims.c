// C shims between nri.h's spec generator callbacks and the Go callbacks of
// this package. The user data is the call's cgo.Handle, an integer cast to
// a pointer; it is never dereferenced, and never Go memory.

#include <stdint.h>
#include "nri.h"
#include "shims.h"
#include "_cgo_export.h"

static uintptr_t spec_handle(void *ud) { return (uintptr_t)ud; }

static void spec_annotations(void *ud, const uint8_t *json, size_t len, nri_reply *reply) {
	nriGoSpecFilterAnnotations(spec_handle(ud), (uint8_t *)json, len, reply);
}

static void spec_blockio(void *ud, const char *class_name, nri_reply *reply) {
	nriGoSpecResolveBlockIO(spec_handle(ud), (char *)class_name, reply);
}

static void spec_rdt(void *ud, const char *class_name, nri_reply *reply) {
	nriGoSpecResolveRdt(spec_handle(ud), (char *)class_name, reply);
}

static void spec_resources(void *ud, const uint8_t *json, size_t len, nri_reply *reply) {
	nriGoSpecCheckResources(spec_handle(ud), (uint8_t *)json, len, reply);
}

static void spec_cdi(void *ud, const uint8_t *spec, size_t len, const char *const *names, size_t count, nri_reply *reply) {
	nriGoSpecInjectCDIDevices(spec_handle(ud), (uint8_t *)spec, len, (char **)names, count, reply);
}

nri_spec_generator *nri_go_spec_generator(uintptr_t h, uint32_t use) {
	nri_spec_generator *g = nri_spec_generator_new();
	void *ud = (void *)h;
	nri_status st = NRI_STATUS_OK;
	if (st == NRI_STATUS_OK && (use & 1))
		st = nri_spec_generator_set_annotation_filter(g, spec_annotations, ud, NULL, NULL);
	if (st == NRI_STATUS_OK && (use & 2))
		st = nri_spec_generator_set_blockio_resolver(g, spec_blockio, ud, NULL, NULL);
	if (st == NRI_STATUS_OK && (use & 4))
		st = nri_spec_generator_set_rdt_resolver(g, spec_rdt, ud, NULL, NULL);
	if (st == NRI_STATUS_OK && (use & 8))
		st = nri_spec_generator_set_resource_checker(g, spec_resources, ud, NULL, NULL);
	if (st == NRI_STATUS_OK && (use & 16))
		st = nri_spec_generator_set_cdi_injector(g, spec_cdi, ud, NULL, NULL);
	if (st != NRI_STATUS_OK) {
		nri_spec_generator_free(g);
		return NULL;
	}
	return g;
}
