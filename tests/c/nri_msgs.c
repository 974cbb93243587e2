#include "nri_msgs.h"

#include <string.h>

void msg_pod(pb *out, const char *pod_id)
{
    pb_string(out, F_POD_ID, pod_id);
    pb_string(out, F_POD_NAME, pod_id);
    pb_string(out, F_POD_UID, "uid-0");
    pb_string(out, F_POD_NAMESPACE, "default");
}

void msg_container(pb *out, const char *pod_id, const char *ctr_id, const char *name)
{
    pb_string(out, F_CTR_ID, ctr_id);
    pb_string(out, F_CTR_POD_ID, pod_id);
    pb_string(out, F_CTR_NAME, name);
    pb_varint(out, F_CTR_STATE, 1); /* CONTAINER_CREATED */
}

void msg_pod_request(pb *out, const char *pod_id)
{
    pb pod = { 0 };
    msg_pod(&pod, pod_id);
    pb_message(out, F_REQ_POD, &pod);
}

void msg_container_request(pb *out, const char *pod_id, const char *ctr_id, const char *name)
{
    pb pod = { 0 }, ctr = { 0 };
    msg_pod(&pod, pod_id);
    msg_container(&ctr, pod_id, ctr_id, name);
    pb_message(out, F_REQ_POD, &pod);
    pb_message(out, F_REQ_CONTAINER, &ctr);
}

void msg_cpu_resources(pb *out, uint64_t shares)
{
    pb value = { 0 }, cpu = { 0 };
    pb_varint(&value, F_OPT_VALUE, shares);
    pb_message(&cpu, F_CPU_SHARES, &value);
    pb_message(out, F_RES_CPU, &cpu);
}

void msg_cpu_update(pb *out, const char *ctr_id, uint64_t shares)
{
    pb res = { 0 }, lcu = { 0 };
    msg_cpu_resources(&res, shares);
    pb_message(&lcu, F_LCU_RESOURCES, &res);
    pb_string(out, F_CU_CONTAINER_ID, ctr_id);
    pb_message(out, F_CU_LINUX, &lcu);
}

void msg_create_response_env(pb *out, const char *key, const char *value)
{
    pb kv = { 0 }, adjust = { 0 };
    pb_string(&kv, F_KEY, key);
    pb_string(&kv, F_VALUE, value);
    pb_message(&adjust, F_ADJ_ENV, &kv);
    pb_message(out, F_CREATE_RSP_ADJUST, &adjust);
}

void msg_sync_state(pb *out, const char *pod_id, const char *ctr_id)
{
    pb pod = { 0 }, ctr = { 0 };
    msg_pod(&pod, pod_id);
    msg_container(&ctr, pod_id, ctr_id, ctr_id);
    pb_message(out, F_SYNC_PODS, &pod);
    pb_message(out, F_SYNC_CONTAINERS, &ctr);
}

int msg_ids(const uint8_t *req, size_t len, char *pod, char *ctr)
{
    pb_field f;
    pod[0] = ctr[0] = '\0';
    if (pb_count(req, len, F_REQ_POD) < 0)
        return 0;
    if (pb_get(req, len, F_REQ_POD, 0, &f))
        pb_get_string(f.data, f.len, F_POD_ID, pod, 128);
    if (pb_get(req, len, F_REQ_CONTAINER, 0, &f))
        pb_get_string(f.data, f.len, F_CTR_ID, ctr, 128);
    return 1;
}

/* Finds `key` among the repeated key/value messages `field` of `msg`. */
static int find_kv(const uint8_t *msg, size_t len, uint32_t field, const char *key,
                   char *value, size_t cap)
{
    pb_field entry;
    char k[256];
    for (size_t i = 0; pb_get(msg, len, field, i, &entry); i++) {
        if (pb_get_string(entry.data, entry.len, F_KEY, k, sizeof k) && strcmp(k, key) == 0) {
            if (!pb_get_string(entry.data, entry.len, F_VALUE, value, cap))
                value[0] = '\0';
            return 1;
        }
    }
    return 0;
}

int msg_adjust_env(const uint8_t *adj, size_t len, const char *key, char *value, size_t cap)
{
    return find_kv(adj, len, F_ADJ_ENV, key, value, cap);
}

int msg_adjust_annotation(const uint8_t *adj, size_t len, const char *key, char *value, size_t cap)
{
    return find_kv(adj, len, F_ADJ_ANNOTATIONS, key, value, cap);
}

uint64_t msg_update_cpu_shares(const uint8_t *upd, size_t len, char *ctr, size_t cap)
{
    static const uint32_t path[] = { F_CU_LINUX, F_LCU_RESOURCES, F_RES_CPU, F_CPU_SHARES };
    const uint8_t *shares;
    size_t shares_len;
    pb_field v;
    if (!pb_get_string(upd, len, F_CU_CONTAINER_ID, ctr, cap))
        ctr[0] = '\0';
    if (!pb_path(upd, len, path, 4, &shares, &shares_len)
        || !pb_get(shares, shares_len, F_OPT_VALUE, 0, &v))
        return 0;
    return v.varint;
}
