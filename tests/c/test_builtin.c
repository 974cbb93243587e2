/* Builtin plugins written in C (nri_options_add_builtin_plugin): they
 * adjust containers, reject them at validation, fail events, conflict,
 * and are called in index order with their own user data. */
#include "harness.h"

#include <string.h>

typedef struct fixture {
    tmpdir dir;
    runtime rt;
    recorder r10, r20;
    nri_options *opts;
    nri_adaptation *a;
} fixture;

static int setup(void **state)
{
    fixture *f = test_calloc(1, sizeof *f);
    tmp_make(&f->dir);
    runtime_init(&f->rt);
    recorder_init(&f->r10);
    recorder_init(&f->r20);
    f->opts = test_options(&f->dir, 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    nri_options_free(f->opts); /* if no adaptation consumed them */
    nri_adaptation_free(f->a);
    recorder_destroy(&f->r10);
    recorder_destroy(&f->r20);
    runtime_destroy(&f->rt);
    tmp_remove(&f->dir);
    test_free(f);
    return th_teardown(state);
}

static void add(fixture *f, recorder *r, const char *name, const char *index, int32_t events)
{
    nri_error *err = NULL;
    nri_builtin_plugin p = recorder_plugin(r, name, index, events);
    assert_ok(nri_options_add_builtin_plugin(f->opts, &p, &err), &err);
}

static void start(fixture *f)
{
    nri_error *err = NULL;
    f->a = new_adaptation(&f->rt, f->opts);
    f->opts = NULL;
    assert_ok(nri_adaptation_start(f->a, &err), &err);
}

static nri_status create(fixture *f, const char *name, nri_buffer *rsp, nri_error **err)
{
    pb req = { 0 };
    msg_container_request(&req, "pod0", name, name);
    nri_status st = nri_adaptation_create_container(f->a, req.data, req.len, rsp, err);
    pb_free(&req);
    return st;
}

static void plugins_adjust_in_index_order(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    nri_buffer rsp = { 0 };
    char value[64];
    const uint8_t *adj;
    size_t adj_len;
    f->r10.env_key = "TEN";
    f->r10.env_value = "10";
    f->r20.env_key = "TWENTY";
    f->r20.env_value = "20";
    /* Added in reverse: the index, not the order, decides. */
    add(f, &f->r20, "twenty", "20", 0);
    add(f, &f->r10, "ten", "10", 0);
    start(f);

    assert_ok(create(f, "ctr", &rsp, &err), &err);
    static const uint32_t adjust[] = { F_CREATE_RSP_ADJUST };
    assert_true(pb_path(rsp.data, rsp.len, adjust, 1, &adj, &adj_len));
    assert_true(msg_adjust_env(adj, adj_len, "TEN", value, sizeof value));
    assert_string_equal(value, "10");
    assert_true(msg_adjust_env(adj, adj_len, "TWENTY", value, sizeof value));
    assert_string_equal(value, "20");
    nri_buffer_free(&rsp);

    const seen_call *c10 = recorder_last(&f->r10, NRI_BUILTIN_OP_CREATE_CONTAINER);
    const seen_call *c20 = recorder_last(&f->r20, NRI_BUILTIN_OP_CREATE_CONTAINER);
    assert_non_null(c10);
    assert_non_null(c20);
    assert_true(c10->seq < c20->seq);
    /* Each plugin's user data is its own (checked in the handler) and
     * freed with the adaptation. */
    nri_adaptation_free(f->a);
    f->a = NULL;
    assert_int_equal(f->r10.freed, 1);
    assert_int_equal(f->r20.freed, 1);
}

static void subscription_comes_from_the_events_mask(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    nri_buffer rsp = { 0 };
    add(f, &f->r10, "creates-only", "10", EVENT_BIT(NRI_BUILTIN_OP_CREATE_CONTAINER));
    start(f);
    pb req = { 0 };
    msg_pod_request(&req, "pod0");
    assert_ok(nri_adaptation_run_pod_sandbox(f->a, req.data, req.len, &err), &err);
    pb_free(&req);
    assert_ok(create(f, "ctr", &rsp, &err), &err);
    nri_buffer_free(&rsp);
    assert_int_equal(recorder_count(&f->r10, NRI_BUILTIN_OP_RUN_POD_SANDBOX), 0);
    assert_int_equal(recorder_count(&f->r10, NRI_BUILTIN_OP_CREATE_CONTAINER), 1);
    /* Not subscribed to validation: not a validator. */
    assert_int_equal(recorder_count(&f->r10, NRI_BUILTIN_OP_VALIDATE_CONTAINER_ADJUSTMENT), 0);
}

static void a_validator_rejects_with_its_reason(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    nri_buffer untouched = { (uint8_t *)&untouched, 7 }, rsp = untouched;
    f->r10.env_key = "PRIVILEGED";
    f->r10.env_value = "1";
    f->r20.fail_op = NRI_BUILTIN_OP_VALIDATE_CONTAINER_ADJUSTMENT;
    f->r20.fail_message = "no privileged containers here";
    add(f, &f->r10, "adjuster", "10", EVENT_BIT(NRI_BUILTIN_OP_CREATE_CONTAINER));
    add(f, &f->r20, "validator", "20", EVENT_BIT(NRI_BUILTIN_OP_VALIDATE_CONTAINER_ADJUSTMENT));
    start(f);

    assert_fails(create(f, "ctr", &rsp, &err), &err, NRI_STATUS_REJECTED,
                 "no privileged containers here");
    /* Outputs are written only on success. */
    assert_memory_equal(&rsp, &untouched, sizeof rsp);
    /* The validator saw the adjustment it rejected. */
    const seen_call *v = recorder_last(&f->r20, NRI_BUILTIN_OP_VALIDATE_CONTAINER_ADJUSTMENT);
    const uint8_t *adj;
    size_t adj_len;
    char value[16];
    static const uint32_t path[] = { F_VALIDATE_ADJUST };
    assert_non_null(v);
    assert_true(pb_path(v->req, v->len, path, 1, &adj, &adj_len));
    assert_true(msg_adjust_env(adj, adj_len, "PRIVILEGED", value, sizeof value));
}

static void handler_errors_fail_the_event(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    nri_buffer rsp = { 0 };
    f->r10.fail_op = NRI_BUILTIN_OP_CREATE_CONTAINER;
    f->r10.fail_message = "out of widgets";
    add(f, &f->r10, "failing", "10", 0);
    start(f);
    assert_fails(create(f, "ctr", &rsp, &err), &err, NRI_STATUS_PLUGIN_FAILED, "out of widgets");
    assert_null(rsp.data);
    /* Builtin plugins are never dropped: the next event reaches it. */
    pb req = { 0 };
    msg_pod_request(&req, "pod0");
    assert_ok(nri_adaptation_run_pod_sandbox(f->a, req.data, req.len, &err), &err);
    assert_int_equal(recorder_count(&f->r10, NRI_BUILTIN_OP_RUN_POD_SANDBOX), 1);
    pb_free(&req);
}

static void undecodable_replies_fail_the_event(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    nri_buffer rsp = { 0 };
    f->r10.garbage_op = NRI_BUILTIN_OP_CREATE_CONTAINER;
    add(f, &f->r10, "garbled", "10", 0);
    start(f);
    assert_fails(create(f, "ctr", &rsp, &err), &err, NRI_STATUS_PLUGIN_FAILED,
                 "CreateContainerResponse");
}

static void same_env_from_two_plugins_conflicts(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    nri_buffer rsp = { 0 };
    f->r10.env_key = f->r20.env_key = "SHARED";
    f->r10.env_value = "ten";
    f->r20.env_value = "twenty";
    add(f, &f->r10, "ten", "10", 0);
    add(f, &f->r20, "twenty", "20", 0);
    start(f);
    assert_fails(create(f, "ctr", &rsp, &err), &err, NRI_STATUS_CONFLICT, "SHARED");
    assert_null(rsp.data);
}

static void configure_error_fails_start(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    f->r10.fail_op = NRI_BUILTIN_OP_CONFIGURE;
    f->r10.fail_message = "bad config";
    add(f, &f->r10, "unconfigurable", "10", 0);
    f->a = new_adaptation(&f->rt, f->opts);
    f->opts = NULL;
    assert_fails(nri_adaptation_start(f->a, &err), &err, NRI_STATUS_START_FAILED, "bad config");
    assert_int_equal(f->rt.syncs, 0);
}

static void unusable_plugins_are_refused_and_finalized(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    nri_builtin_plugin p = recorder_plugin(&f->r10, "ok", "10", 0);
    int freed = 0;

    p.handle = NULL;
    assert_fails(nri_options_add_builtin_plugin(f->opts, &p, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "has no handler");
    /* The user data is owned from the call on, even when it fails. */
    assert_int_equal(f->r10.freed, ++freed);

    p = recorder_plugin(&f->r10, NULL, "10", 0);
    assert_fails(nri_options_add_builtin_plugin(f->opts, &p, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "plugin name is NULL");
    assert_int_equal(f->r10.freed, ++freed);

    p = recorder_plugin(&f->r10, "ok", NULL, 0);
    assert_fails(nri_options_add_builtin_plugin(f->opts, &p, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "plugin index is NULL");
    assert_int_equal(f->r10.freed, ++freed);

    p = recorder_plugin(&f->r10, "", "10", 0);
    assert_fails(nri_options_add_builtin_plugin(f->opts, &p, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "empty name or index");
    assert_int_equal(f->r10.freed, ++freed);

    p = recorder_plugin(&f->r10, "bad\xff", "10", 0);
    assert_fails(nri_options_add_builtin_plugin(f->opts, &p, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "not UTF-8");
    assert_int_equal(f->r10.freed, ++freed);

    p = recorder_plugin(&f->r10, "ok", "10", 0);
    assert_fails(nri_options_add_builtin_plugin(NULL, &p, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "options is NULL");
    assert_int_equal(f->r10.freed, ++freed);

    assert_fails(nri_options_add_builtin_plugin(f->opts, NULL, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "plugin is NULL");

    /* Invalid event bits are refused when the plugin is configured. */
    add(f, &f->r20, "bits", "20", (int32_t)0x40000000);
    f->a = new_adaptation(&f->rt, f->opts);
    f->opts = NULL;
    assert_fails(nri_adaptation_start(f->a, &err), &err, NRI_STATUS_START_FAILED,
                 "invalid plugin events");
    nri_adaptation_free(f->a);
    f->a = NULL;
    assert_int_equal(f->r20.freed, 1);
}

#define B_TEST(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    harness_init();
    const struct CMUnitTest tests[] = {
        B_TEST(plugins_adjust_in_index_order),
        B_TEST(subscription_comes_from_the_events_mask),
        B_TEST(a_validator_rejects_with_its_reason),
        B_TEST(handler_errors_fail_the_event),
        B_TEST(undecodable_replies_fail_the_event),
        B_TEST(same_env_from_two_plugins_conflicts),
        B_TEST(configure_error_fails_start),
        B_TEST(unusable_plugins_are_refused_and_finalized),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
