/* The spec generator's C ABI (nri_spec_*): a runtime-spec JSON spec and a
 * protobuf ContainerAdjustment in, the adjusted spec as JSON out; every
 * option as a C callback, errors, finalizers, and one generator used from
 * several threads.
 *
 * Callbacks run on the calling thread, inside the library's frames, so
 * they check with TH_CHECK (no longjmp through Rust) like every callback. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Field numbers (crates/nri-api/proto/nri.proto) of what these tests build. */
enum {
    F_ADJ_MOUNTS = 3, F_ADJ_LINUX = 6, F_ADJ_RLIMITS = 7, F_ADJ_CDI = 8,
    F_LINUX_RESOURCES = 2,
    F_RES_MEMORY = 1, F_RES_BLOCKIO_CLASS = 4, F_RES_RDT_CLASS = 5, F_RES_PIDS = 8,
    F_MEM_LIMIT = 1, F_PIDS_LIMIT = 1,
    F_RLIMIT_TYPE = 1, F_RLIMIT_HARD = 2, F_RLIMIT_SOFT = 3,
    F_CDI_NAME = 1,
    F_MOUNT_DEST = 1, F_MOUNT_SOURCE = 3, F_MOUNT_OPTIONS = 4,
};

static const char SPEC[] =
    "{\"ociVersion\":\"1.2.0\","
    "\"process\":{\"user\":{\"uid\":0,\"gid\":0},\"cwd\":\"/\",\"env\":[\"PATH=/bin\"]},"
    "\"linux\":{\"resources\":{\"pids\":{}}}}";

/* Whether `needle` occurs in the `len` bytes at `hay`. */
static int contains(const void *hay, size_t len, const char *needle)
{
    size_t n = strlen(needle);
    for (const char *p = hay; n <= len && (size_t)(p - (const char *)hay) <= len - n; p++)
        if (memcmp(p, needle, n) == 0)
            return 1;
    return 0;
}

static void kv(pb *adj, uint32_t field, const char *key, const char *value)
{
    pb e = { 0 };
    pb_string(&e, F_KEY, key);
    pb_string(&e, F_VALUE, value);
    pb_message(adj, field, &e);
}

static void opt_string(pb *msg, uint32_t field, const char *value)
{
    pb o = { 0 };
    pb_string(&o, F_OPT_VALUE, value);
    pb_message(msg, field, &o);
}

/* LinuxResources: memory limit (if > 0), pids limit (if has_pids), classes
 * (if not NULL). */
static void resources(pb *out, int64_t memory, int has_pids, int64_t pids,
                      const char *blockio, const char *rdt)
{
    if (memory > 0) {
        pb m = { 0 }, l = { 0 };
        pb_varint(&l, F_OPT_VALUE, (uint64_t)memory);
        pb_message(&m, F_MEM_LIMIT, &l);
        pb_message(out, F_RES_MEMORY, &m);
    }
    if (blockio)
        opt_string(out, F_RES_BLOCKIO_CLASS, blockio);
    if (rdt)
        opt_string(out, F_RES_RDT_CLASS, rdt);
    if (has_pids) {
        pb p = { 0 };
        pb_varint(&p, F_PIDS_LIMIT, (uint64_t)pids);
        pb_message(out, F_RES_PIDS, &p);
    }
}

static void adjust_resources(pb *adj, pb *res)
{
    pb linux = { 0 };
    pb_message(&linux, F_LINUX_RESOURCES, res);
    pb_message(adj, F_ADJ_LINUX, &linux);
}

static void cdi_device(pb *adj, const char *name)
{
    pb d = { 0 };
    pb_string(&d, F_CDI_NAME, name);
    pb_message(adj, F_ADJ_CDI, &d);
}

/* Runs nri_spec_adjust; on success `*out` (and `*cdi`, if not NULL) hold
 * NUL-terminated copies the caller frees. */
static nri_status adjust(const nri_spec_generator *g, const char *spec, const pb *adj,
                         char **out, char **cdi, nri_error **err)
{
    nri_buffer o = { 0 }, c = { 0 };
    nri_status st = nri_spec_adjust(g, (const uint8_t *)spec, strlen(spec), adj->data, adj->len,
                                    &o, cdi ? &c : NULL, err);
    if (st != NRI_STATUS_OK) {
        assert_null(o.data);
        assert_null(c.data);
        return st;
    }
    *out = strndup((const char *)o.data, o.len);
    if (cdi)
        *cdi = strndup((const char *)c.data, c.len);
    nri_buffer_free(&o);
    nri_buffer_free(&c);
    return st;
}

static nri_spec_generator *plain(void)
{
    nri_spec_generator *g = nri_spec_generator_new();
    nri_error *err = NULL;
    assert_non_null(g);
    assert_ok(nri_spec_generator_disable_propagation_check(g, &err), &err);
    return g;
}

static void a_json_spec_takes_a_protobuf_adjustment(void **state)
{
    (void)state;
    nri_spec_generator *g = plain();
    nri_error *err = NULL;
    pb adj = { 0 }, res = { 0 };
    char *out = NULL, *cdi = NULL;

    kv(&adj, F_ADJ_ENV, "HELLO", "world");
    cdi_device(&adj, "vendor.com/gpu=0");
    resources(&res, 2000, 0, 0, NULL, NULL);
    adjust_resources(&adj, &res);
    assert_ok(adjust(g, SPEC, &adj, &out, &cdi, &err), &err);
    assert_non_null(strstr(out, "\"env\":[\"PATH=/bin\",\"HELLO=world\"]"));
    assert_non_null(strstr(out, "\"memory\":{\"limit\":2000,\"swap\":2000}"));
    /* A pids section without a limit stays without one; nothing is null. */
    assert_non_null(strstr(out, "\"pids\":{}"));
    assert_null(strstr(out, "null"));
    assert_string_equal(cdi, "[\"vendor.com/gpu=0\"]");
    free(out);
    free(cdi);
    pb_free(&adj);
    nri_spec_generator_free(g);
    nri_spec_generator_free(NULL);
}

static void updates_and_their_oci_form(void **state)
{
    (void)state;
    nri_spec_generator *g = plain();
    nri_error *err = NULL;
    pb res = { 0 };
    nri_buffer out = { 0 };

    msg_cpu_resources(&res, 512);
    assert_ok(nri_spec_update_resources(g, (const uint8_t *)SPEC, strlen(SPEC), res.data, res.len,
                                        &out, &err), &err);
    char *spec = strndup((const char *)out.data, out.len);
    assert_non_null(strstr(spec, "\"cpu\":{\"shares\":512}"));
    free(spec);
    nri_buffer_free(&out);

    assert_ok(nri_spec_resources_to_oci(res.data, res.len, &out, &err), &err);
    char *oci = strndup((const char *)out.data, out.len);
    assert_string_equal(oci, "{\"cpu\":{\"shares\":512},\"memory\":{}}"); /* keys sorted */
    free(oci);
    nri_buffer_free(&out);
    pb_free(&res);
    nri_spec_generator_free(g);
}

/* ---- Callbacks --------------------------------------------------------- */

typedef struct seen {
    int freed;
    int checks;
    char names[256];
} seen;

static void free_seen(void *ud)
{
    __atomic_add_fetch(&((seen *)ud)->freed, 1, __ATOMIC_SEQ_CST);
}

static void reply_text(nri_reply *reply, const char *text)
{
    TH_CHECK(nri_reply_set_data(reply, (const uint8_t *)text, strlen(text)) == NRI_STATUS_OK);
}

/* Refuses `{"fail": ...}`; keeps only the key "keep". */
static void filter(void *ud, const uint8_t *json, size_t len, nri_reply *reply)
{
    (void)ud;
    if (contains(json, len, "\"fail\"")) {
        nri_reply_set_error(reply, "no fail allowed");
        return;
    }
    reply_text(reply, contains(json, len, "\"keep\"") ? "{\"keep\":\"yes\"}" : "{}");
}

static void blockio(void *ud, const char *class_name, nri_reply *reply)
{
    (void)ud;
    if (strcmp(class_name, "slow") == 0)
        reply_text(reply, "{\"weight\":10}");
    else if (strcmp(class_name, "garbage") == 0)
        reply_text(reply, "{");
    else if (strcmp(class_name, "none") != 0)   /* "none": no data, clears */
        nri_reply_set_error(reply, "unknown class");
}

static void rdt(void *ud, const char *class_name, nri_reply *reply)
{
    (void)ud;
    char json[128];
    snprintf(json, sizeof json, "{\"closID\":\"%s\"}", class_name);
    reply_text(reply, json);
}

/* Counts its calls; refuses a memory limit of 1 GiB or more; otherwise
 * answers with CPU shares 2 (replacing the resources). */
static void checker(void *ud, const uint8_t *json, size_t len, nri_reply *reply)
{
    __atomic_add_fetch(&((seen *)ud)->checks, 1, __ATOMIC_SEQ_CST);
    if (contains(json, len, "\"limit\":1073741824")) {
        nri_reply_set_error(reply, "too much memory");
        return;
    }
    reply_text(reply, "{\"cpu\":{\"shares\":2}}");
}

/* Records the names; sets a hostname in the spec it is given. */
static void inject(void *ud, const uint8_t *spec, size_t len, const char *const *names,
                   size_t count, nri_reply *reply)
{
    seen *s = ud;
    TH_CHECK(contains(spec, len, "\"HELLO=world\"")); /* the earlier steps */
    s->names[0] = 0;
    for (size_t i = 0; i < count; i++) {
        strncat(s->names, names[i], sizeof s->names - strlen(s->names) - 2);
        strcat(s->names, ";");
    }
    static const char host[] = "{\"hostname\":\"injected\",";
    TH_CHECK(len > 1 && spec[0] == '{');
    pb out = { 0 };
    pb_raw(&out, host, strlen(host));
    pb_raw(&out, spec + 1, len - 1);
    TH_CHECK(nri_reply_set_data(reply, out.data, out.len) == NRI_STATUS_OK);
    pb_free(&out);
}

static void no_propagation(void *ud, const char *source, const char *const *accepted,
                           size_t count, nri_reply *reply)
{
    (void)ud;
    char msg[256];
    snprintf(msg, sizeof msg, "%s is not %s (%zu accepted)", source, accepted[0], count);
    nri_reply_set_error(reply, msg);
}

/* Only counts its calls: no data keeps the resources. */
static void counting_checker(void *ud, const uint8_t *json, size_t len, nri_reply *reply)
{
    (void)json, (void)len, (void)reply;
    __atomic_add_fetch(&((seen *)ud)->checks, 1, __ATOMIC_SEQ_CST);
}

/* A generator with every callback, their user data `s`. */
static nri_spec_generator *full(seen *s)
{
    nri_spec_generator *g = plain();
    nri_error *err = NULL;
    assert_ok(nri_spec_generator_set_annotation_filter(g, filter, s, free_seen, &err), &err);
    assert_ok(nri_spec_generator_set_label_filter(g, filter, s, free_seen, &err), &err);
    assert_ok(nri_spec_generator_set_blockio_resolver(g, blockio, s, free_seen, &err), &err);
    assert_ok(nri_spec_generator_set_rdt_resolver(g, rdt, s, free_seen, &err), &err);
    assert_ok(nri_spec_generator_set_resource_checker(g, checker, s, free_seen, &err), &err);
    assert_ok(nri_spec_generator_set_cdi_injector(g, inject, s, free_seen, &err), &err);
    assert_ok(nri_spec_generator_set_propagation_checker(g, no_propagation, s, free_seen, &err),
              &err);
    return g;
}

static void callbacks_answer_in_json(void **state)
{
    (void)state;
    seen s = { 0 };
    nri_spec_generator *g = full(&s);
    nri_error *err = NULL;
    pb adj = { 0 }, res = { 0 };
    char *out = NULL, *cdi = NULL;

    kv(&adj, F_ADJ_ANNOTATIONS, "keep", "yes");
    kv(&adj, F_ADJ_ENV, "HELLO", "world");
    cdi_device(&adj, "vendor.com/gpu=0");
    cdi_device(&adj, "vendor.com/gpu=1");
    resources(&res, 2000, 0, 0, "slow", "gold");
    adjust_resources(&adj, &res);
    assert_ok(adjust(g, SPEC, &adj, &out, &cdi, &err), &err);
    assert_non_null(strstr(out, "\"annotations\":{\"keep\":\"yes\"}"));
    assert_non_null(strstr(out, "\"hostname\":\"injected\""));
    assert_non_null(strstr(out, "\"cpu\":{\"shares\":2}"));
    assert_non_null(strstr(out, "\"blockIO\":{\"weight\":10}"));
    assert_non_null(strstr(out, "\"intelRdt\":{\"closID\":\"gold\"}"));
    assert_string_equal(s.names, "vendor.com/gpu=0;vendor.com/gpu=1;");
    assert_string_equal(cdi, "[]");
    assert_int_equal(s.checks, 1);
    free(out);
    free(cdi);
    pb_free(&adj);

    static const char labels[] = "{\"keep\":\"yes\",\"drop\":\"no\"}";
    nri_buffer filtered = { 0 };
    assert_ok(nri_spec_filter_labels(g, (const uint8_t *)labels, strlen(labels), &filtered, &err),
              &err);
    assert_int_equal(filtered.len, strlen("{\"keep\":\"yes\"}"));
    assert_memory_equal(filtered.data, "{\"keep\":\"yes\"}", filtered.len);
    nri_buffer_free(&filtered);

    assert_int_equal(s.freed, 0);
    nri_spec_generator_free(g);
    assert_int_equal(s.freed, 7);
}

static void callback_errors_refuse_with_upstreams_text(void **state)
{
    (void)state;
    seen s = { 0 };
    nri_spec_generator *g = full(&s);
    nri_error *err = NULL;
    char *out = NULL;
    struct {
        const char *blockio;
        int64_t memory;
        const char *annotation;
        const char *want;
    } cases[] = {
        { NULL, 0, "fail", "failed to adjust annotations in OCI Spec: no fail allowed" },
        { "bad", 0, NULL, "failed to adjust BlockIO class in OCI Spec: unknown class" },
        { "garbage", 0, NULL, "block I/O class resolver: invalid JSON" },
        { NULL, 1 << 30, NULL, "failed to adjust resources in OCI Spec: too much memory" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pb adj = { 0 }, res = { 0 };
        if (cases[i].annotation)
            kv(&adj, F_ADJ_ANNOTATIONS, cases[i].annotation, "");
        resources(&res, cases[i].memory, 0, 0, cases[i].blockio, NULL);
        adjust_resources(&adj, &res);
        assert_fails(adjust(g, SPEC, &adj, &out, NULL, &err), &err, NRI_STATUS_CALLBACK_FAILED,
                     cases[i].want);
        pb_free(&adj);
    }

    /* A mount asking for shared propagation, refused by the checker. */
    pb adj = { 0 }, m = { 0 };
    pb_string(&m, F_MOUNT_DEST, "/shared");
    pb_string(&m, F_MOUNT_SOURCE, "/host");
    pb_string(&m, F_MOUNT_OPTIONS, "rbind");
    pb_string(&m, F_MOUNT_OPTIONS, "rshared");
    pb_message(&adj, F_ADJ_MOUNTS, &m);
    assert_fails(adjust(g, SPEC, &adj, &out, NULL, &err), &err, NRI_STATUS_CALLBACK_FAILED,
                 "failed to adjust mounts in OCI Spec: /host is not rshared (1 accepted)");
    pb_free(&adj);

    static const char labels[] = "{\"fail\":\"\"}";
    nri_buffer filtered = { 0 };
    assert_fails(nri_spec_filter_labels(g, (const uint8_t *)labels, strlen(labels), &filtered,
                                        &err), &err, NRI_STATUS_CALLBACK_FAILED,
                 "failed to filter labels: no fail allowed");
    assert_null(filtered.data);
    nri_spec_generator_free(g);
    assert_int_equal(s.freed, 7);
}

/* ---- Errors ------------------------------------------------------------ */

static void bad_input_is_refused(void **state)
{
    (void)state;
    nri_spec_generator *g = plain();
    nri_error *err = NULL;
    pb empty = { 0 }, adj = { 0 }, r = { 0 };
    char *out = NULL;
    nri_buffer buf = { 0 };
    static const uint8_t garbage[] = { 0xff, 0xff };

    assert_fails(adjust(g, "{", &empty, &out, NULL, &err), &err, NRI_STATUS_INVALID_SPEC,
                 "invalid JSON");
    assert_fails(adjust(g, "{\"process\":{}}", &empty, &out, NULL, &err), &err,
                 NRI_STATUS_INVALID_SPEC, "missing field `user`");
    static const char vm[] = "{\"vm\":{\"hypervisor\":{\"path\":\"/hv\"},\"kernel\":{\"path\":\"/k\"},"
                             "\"hwconfig\":{\"vcpus\":2}}}";
    assert_fails(adjust(g, vm, &empty, &out, NULL, &err), &err, NRI_STATUS_INVALID_SPEC,
                 "spec fields oci-spec 0.10 cannot hold would be lost: vm.hwconfig");
    assert_fails(nri_spec_adjust(g, (const uint8_t *)SPEC, strlen(SPEC), garbage, sizeof garbage,
                                 &buf, NULL, &err), &err, NRI_STATUS_INVALID_MESSAGE,
                 "invalid ContainerAdjustment");
    assert_null(buf.data);

    pb_string(&r, F_RLIMIT_TYPE, "nofile");
    pb_varint(&r, F_RLIMIT_HARD, 2);
    pb_varint(&r, F_RLIMIT_SOFT, 1);
    pb_message(&adj, F_ADJ_RLIMITS, &r);
    assert_fails(adjust(g, SPEC, &adj, &out, NULL, &err), &err, NRI_STATUS_SPEC_REFUSED,
                 "cannot apply rlimit type \"nofile\"");
    pb_free(&adj);

    /* NULL handle, output slot, data with a length. */
    assert_fails(nri_spec_adjust(NULL, (const uint8_t *)SPEC, strlen(SPEC), NULL, 0, &buf, NULL,
                                 &err), &err, NRI_STATUS_INVALID_ARGUMENT, "generator is NULL");
    assert_fails(nri_spec_update_resources(g, (const uint8_t *)SPEC, strlen(SPEC), NULL, 0, NULL,
                                           &err), &err, NRI_STATUS_INVALID_ARGUMENT,
                 "output buffer is NULL");
    assert_fails(nri_spec_filter_labels(g, NULL, 3, &buf, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "labels is NULL but its length is 3");
    assert_fails(nri_spec_resources_to_oci(garbage, sizeof garbage, &buf, &err), &err,
                 NRI_STATUS_INVALID_MESSAGE, "invalid LinuxResources");
    assert_fails(nri_spec_resources_to_oci(NULL, 0, NULL, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "out_json is NULL");
    assert_null(buf.data);

    /* Lossy parsing drops what oci-spec cannot hold. */
    nri_spec_generator *lossy = plain();
    assert_ok(nri_spec_generator_allow_lossy_parsing(lossy, &err), &err);
    assert_ok(adjust(lossy, vm, &empty, &out, NULL, &err), &err);
    assert_null(strstr(out, "hwconfig"));
    free(out);
    nri_spec_generator_free(lossy);
    nri_spec_generator_free(g);
}

static void setters_own_their_user_data_even_when_they_fail(void **state)
{
    (void)state;
    seen s = { 0 };
    nri_spec_generator *g = plain();
    nri_error *err = NULL;

    assert_fails(nri_spec_generator_set_cdi_injector(g, NULL, &s, free_seen, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "inject is NULL");
    assert_fails(nri_spec_generator_set_rdt_resolver(NULL, rdt, &s, free_seen, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "generator is NULL");
    assert_int_equal(s.freed, 2);
    assert_fails(nri_spec_generator_disable_propagation_check(NULL, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "generator is NULL");
    assert_fails(nri_spec_generator_allow_lossy_parsing(NULL, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "generator is NULL");
    nri_spec_generator_free(g);
}

/* ---- Threads ----------------------------------------------------------- */

typedef struct worker {
    nri_spec_generator *g;
    int ok;
} worker;

static void *adjust_many(void *arg)
{
    worker *w = arg;
    for (int i = 0; i < 50; i++) {
        pb adj = { 0 }, res = { 0 };
        nri_buffer out = { 0 };
        nri_error *err = NULL;
        resources(&res, 4096 + i, 1, -1, NULL, NULL);
        adjust_resources(&adj, &res);
        nri_status st = nri_spec_adjust(w->g, (const uint8_t *)SPEC, strlen(SPEC), adj.data,
                                        adj.len, &out, NULL, &err);
        TH_CHECK(st == NRI_STATUS_OK);
        TH_CHECK(out.data && contains(out.data, out.len, "\"pids\":{}"));
        w->ok += st == NRI_STATUS_OK;
        nri_error_free(err);
        nri_buffer_free(&out);
        pb_free(&adj);
    }
    return NULL;
}

static void one_generator_serves_many_threads(void **state)
{
    (void)state;
    seen s = { 0 };
    nri_spec_generator *g = plain();
    nri_error *err = NULL;
    assert_ok(nri_spec_generator_set_resource_checker(g, counting_checker, &s, free_seen, &err),
              &err);
    pthread_t threads[4];
    worker workers[4] = { 0 };
    for (int i = 0; i < 4; i++) {
        workers[i].g = g;
        assert_int_equal(pthread_create(&threads[i], NULL, adjust_many, &workers[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        assert_int_equal(pthread_join(threads[i], NULL), 0);
        assert_int_equal(workers[i].ok, 50);
    }
    assert_int_equal(s.checks, 200);
    nri_spec_generator_free(g);
    assert_int_equal(s.freed, 1);
}

int main(void)
{
    harness_init();
    const struct CMUnitTest tests[] = {
        TEST(a_json_spec_takes_a_protobuf_adjustment),
        TEST(updates_and_their_oci_form),
        TEST(callbacks_answer_in_json),
        TEST(callback_errors_refuse_with_upstreams_text),
        TEST(bad_input_is_refused),
        TEST(setters_own_their_user_data_even_when_they_fail),
        TEST(one_generator_serves_many_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
