/* The NRI messages the C tests build and read, by field number
 * (crates/nri-api/proto/nri.proto). Only the fields the tests use are named. */
#ifndef NRI_C_TESTS_MSGS_H
#define NRI_C_TESTS_MSGS_H

#include "pb.h"

enum {
    /* PodSandbox */
    F_POD_ID = 1, F_POD_NAME = 2, F_POD_UID = 3, F_POD_NAMESPACE = 4,
    /* Container */
    F_CTR_ID = 1, F_CTR_POD_ID = 2, F_CTR_NAME = 3, F_CTR_STATE = 4,
    /* Every pod and container request: pod = 1, container = 2 */
    F_REQ_POD = 1, F_REQ_CONTAINER = 2,
    /* UpdateContainerRequest.linux_resources, UpdatePodSandboxRequest.linux_resources */
    F_UPDATE_CTR_RESOURCES = 3, F_UPDATE_POD_RESOURCES = 3,
    /* LinuxResources.cpu, LinuxCPU.shares, Optional*.value */
    F_RES_CPU = 2, F_CPU_SHARES = 1, F_OPT_VALUE = 1,
    /* CreateContainerResponse */
    F_CREATE_RSP_ADJUST = 1, F_CREATE_RSP_UPDATE = 2,
    /* UpdateContainerResponse.update, StopContainerResponse.update */
    F_UPDATE_RSP_UPDATE = 1, F_STOP_RSP_UPDATE = 1,
    /* ContainerAdjustment */
    F_ADJ_ANNOTATIONS = 2, F_ADJ_ENV = 4,
    /* KeyValue and map entries */
    F_KEY = 1, F_VALUE = 2,
    /* ContainerUpdate, LinuxContainerUpdate */
    F_CU_CONTAINER_ID = 1, F_CU_LINUX = 2, F_LCU_RESOURCES = 1,
    /* SynchronizeRequest / SynchronizeResponse / Update(s)ContainersRequest */
    F_SYNC_PODS = 1, F_SYNC_CONTAINERS = 2, F_SYNC_MORE = 3, F_SYNC_RSP_UPDATE = 1,
    F_SYNC_RSP_MORE = 2,
    F_UPDATES_REQ_UPDATE = 1, F_UPDATES_RSP_FAILED = 1,
    /* ConfigureRequest / ConfigureResponse */
    F_CONF_CONFIG = 1, F_CONF_RUNTIME_NAME = 2, F_CONF_RUNTIME_VERSION = 3,
    F_CONF_NRI_VERSION = 6, F_CONF_RSP_EVENTS = 2,
    /* ValidateContainerAdjustmentRequest */
    F_VALIDATE_ADJUST = 3, F_VALIDATE_PLUGINS = 6,
};

/* NRI `Event` numbers as a subscription mask bit (bit e-1). */
#define EVENT_BIT(op) (1 << ((op) - 1))

void msg_pod(pb *out, const char *pod_id);
void msg_container(pb *out, const char *pod_id, const char *ctr_id, const char *name);
/* {pod} requests: Run/Stop/Remove/(Post)UpdatePodSandbox. */
void msg_pod_request(pb *out, const char *pod_id);
/* {pod, container} requests: every container event. */
void msg_container_request(pb *out, const char *pod_id, const char *ctr_id, const char *name);
/* LinuxResources with only cpu.shares set. */
void msg_cpu_resources(pb *out, uint64_t shares);
/* ContainerUpdate of `ctr_id` setting cpu.shares. */
void msg_cpu_update(pb *out, const char *ctr_id, uint64_t shares);
/* CreateContainerResponse whose adjustment adds env `key=value`. */
void msg_create_response_env(pb *out, const char *key, const char *value);
/* SynchronizeRequest with one pod and one container in it. */
void msg_sync_state(pb *out, const char *pod_id, const char *ctr_id);

/* The pod id and container id of a request (empty when absent); 1 if it
 * decodes. `pod` and `ctr` have room for 128 bytes. */
int msg_ids(const uint8_t *req, size_t len, char *pod, char *ctr);
/* The value of env `key` in a ContainerAdjustment; 1 if found. */
int msg_adjust_env(const uint8_t *adj, size_t len, const char *key, char *value, size_t cap);
/* The value of annotation `key` in a ContainerAdjustment; 1 if found. */
int msg_adjust_annotation(const uint8_t *adj, size_t len, const char *key, char *value, size_t cap);
/* cpu.shares of a ContainerUpdate (0 if unset) and its container id. */
uint64_t msg_update_cpu_shares(const uint8_t *upd, size_t len, char *ctr, size_t cap);

#endif
