/* Builtin plugins written in C (nri_options_add_builtin_plugin): they
 * adjust containers, reject them at validation, fail events, conflict,
 * and are called in index order with their own user data. */
#include "harness.h"

#include <string.h>

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
    f->rec.env_key = "TEN";
    f->rec.env_value = "10";
    f->rec2.env_key = "TWENTY";
    f->rec2.env_value = "20";
    /* Added in reverse: the index, not the order, decides. */
    fixture_add(f, &f->rec2, "twenty", "20", 0);
    fixture_add(f, &f->rec, "ten", "10", 0);
    fixture_start(f);

    assert_ok(create(f, "ctr", &rsp, &err), &err);
    static const uint32_t adjust[] = { F_CREATE_RSP_ADJUST };
    assert_true(pb_path(rsp.data, rsp.len, adjust, 1, &adj, &adj_len));
    assert_true(msg_adjust_env(adj, adj_len, "TEN", value, sizeof value));
    assert_string_equal(value, "10");
    assert_true(msg_adjust_env(adj, adj_len, "TWENTY", value, sizeof value));
    assert_string_equal(value, "20");
    nri_buffer_free(&rsp);

    const seen_call *c10 = recorder_last(&f->rec, NRI_BUILTIN_OP_CREATE_CONTAINER);
    const seen_call *c20 = recorder_last(&f->rec2, NRI_BUILTIN_OP_CREATE_CONTAINER);
    assert_non_null(c10);
    assert_non_null(c20);
    assert_true(c10->seq < c20->seq);
    /* Each plugin's user data is its own (checked in the handler) and
     * freed with the adaptation. */
    nri_adaptation_free(f->a);
    f->a = NULL;
    assert_int_equal(f->rec.freed, 1);
    assert_int_equal(f->rec2.freed, 1);
}

static void subscription_comes_from_the_events_mask(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    nri_buffer rsp = { 0 };
    fixture_add(f, &f->rec, "creates-only", "10", EVENT_BIT(NRI_BUILTIN_OP_CREATE_CONTAINER));
    fixture_start(f);
    pb req = { 0 };
    msg_pod_request(&req, "pod0");
    assert_ok(nri_adaptation_run_pod_sandbox(f->a, req.data, req.len, &err), &err);
    pb_free(&req);
    assert_ok(create(f, "ctr", &rsp, &err), &err);
    nri_buffer_free(&rsp);
    assert_int_equal(recorder_count(&f->rec, NRI_BUILTIN_OP_RUN_POD_SANDBOX), 0);
    assert_int_equal(recorder_count(&f->rec, NRI_BUILTIN_OP_CREATE_CONTAINER), 1);
    /* Not subscribed to validation: not a validator. */
    assert_int_equal(recorder_count(&f->rec, NRI_BUILTIN_OP_VALIDATE_CONTAINER_ADJUSTMENT), 0);
}

/* Whether an event would reach a plugin: subscriptions while running; any
 * event while not running (the event call then says why) or unknown. */
static void wants_event_follows_subscriptions_and_validators(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    fixture_add(f, &f->rec, "creates-only", "10", EVENT_BIT(NRI_BUILTIN_OP_CREATE_CONTAINER));
    fixture_add(f, &f->rec2, "stops-only", "20", EVENT_BIT(NRI_BUILTIN_OP_STOP_CONTAINER));
    nri_adaptation *a = fixture_new(f);
    assert_true(nri_adaptation_wants_event(a, NRI_BUILTIN_OP_RUN_POD_SANDBOX));
    assert_ok(nri_adaptation_start(a, &err), &err);
    assert_true(nri_adaptation_wants_event(a, NRI_BUILTIN_OP_CREATE_CONTAINER));
    assert_true(nri_adaptation_wants_event(a, NRI_BUILTIN_OP_STOP_CONTAINER));
    assert_false(nri_adaptation_wants_event(a, NRI_BUILTIN_OP_RUN_POD_SANDBOX));
    assert_false(nri_adaptation_wants_event(a, NRI_BUILTIN_OP_REMOVE_CONTAINER));
    assert_false(nri_adaptation_wants_event(a, NRI_BUILTIN_OP_UPDATE_POD_SANDBOX));
    /* Unknown events, and not events at all. */
    assert_true(nri_adaptation_wants_event(a, 0));
    assert_true(nri_adaptation_wants_event(a, NRI_BUILTIN_OP_SYNCHRONIZE));
    assert_true(nri_adaptation_wants_event(a, -1));
    assert_true(nri_adaptation_wants_event(NULL, NRI_BUILTIN_OP_RUN_POD_SANDBOX));
    assert_ok(nri_adaptation_stop(a, &err), &err);
    assert_true(nri_adaptation_wants_event(a, NRI_BUILTIN_OP_RUN_POD_SANDBOX));
}

/* Whether a plugin is active, by its full name (idx-name): only while the
 * adaptation runs; never for a NULL handle or name. */
static void has_plugin_names_the_active_plugins(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    fixture_add(f, &f->rec, "creates-only", "10", EVENT_BIT(NRI_BUILTIN_OP_CREATE_CONTAINER));
    nri_adaptation *a = fixture_new(f);
    assert_false(nri_adaptation_has_plugin(a, "10-creates-only"));
    assert_ok(nri_adaptation_start(a, &err), &err);
    assert_true(nri_adaptation_has_plugin(a, "10-creates-only"));
    assert_false(nri_adaptation_has_plugin(a, "creates-only"));
    assert_false(nri_adaptation_has_plugin(a, "20-creates-only"));
    assert_false(nri_adaptation_has_plugin(a, NULL));
    assert_false(nri_adaptation_has_plugin(NULL, "10-creates-only"));
    assert_ok(nri_adaptation_stop(a, &err), &err);
    assert_false(nri_adaptation_has_plugin(a, "10-creates-only"));
}

static void a_validator_wants_every_creation(void **state)
{
    fixture *f = *state;
    fixture_add(f, &f->rec, "validator", "10", EVENT_BIT(NRI_BUILTIN_OP_VALIDATE_CONTAINER_ADJUSTMENT));
    nri_adaptation *a = fixture_start(f);
    assert_true(nri_adaptation_wants_event(a, NRI_BUILTIN_OP_CREATE_CONTAINER));
    assert_false(nri_adaptation_wants_event(a, NRI_BUILTIN_OP_UPDATE_CONTAINER));
}

static void a_validator_rejects_with_its_reason(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    nri_buffer untouched = { (uint8_t *)&untouched, 7 }, rsp = untouched;
    f->rec.env_key = "PRIVILEGED";
    f->rec.env_value = "1";
    f->rec2.fail_op = NRI_BUILTIN_OP_VALIDATE_CONTAINER_ADJUSTMENT;
    f->rec2.fail_message = "no privileged containers here";
    fixture_add(f, &f->rec, "adjuster", "10", EVENT_BIT(NRI_BUILTIN_OP_CREATE_CONTAINER));
    fixture_add(f, &f->rec2, "validator", "20", EVENT_BIT(NRI_BUILTIN_OP_VALIDATE_CONTAINER_ADJUSTMENT));
    fixture_start(f);

    assert_fails(create(f, "ctr", &rsp, &err), &err, NRI_STATUS_REJECTED,
                 "no privileged containers here");
    /* Outputs are written only on success. */
    assert_memory_equal(&rsp, &untouched, sizeof rsp);
    /* The validator saw the adjustment it rejected. */
    const seen_call *v = recorder_last(&f->rec2, NRI_BUILTIN_OP_VALIDATE_CONTAINER_ADJUSTMENT);
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
    f->rec.fail_op = NRI_BUILTIN_OP_CREATE_CONTAINER;
    f->rec.fail_message = "out of widgets";
    fixture_add(f, &f->rec, "failing", "10", 0);
    fixture_start(f);
    assert_fails(create(f, "ctr", &rsp, &err), &err, NRI_STATUS_PLUGIN_FAILED, "out of widgets");
    assert_null(rsp.data);
    /* Builtin plugins are never dropped: the next event reaches it. */
    pb req = { 0 };
    msg_pod_request(&req, "pod0");
    assert_ok(nri_adaptation_run_pod_sandbox(f->a, req.data, req.len, &err), &err);
    assert_int_equal(recorder_count(&f->rec, NRI_BUILTIN_OP_RUN_POD_SANDBOX), 1);
    pb_free(&req);
}

static void undecodable_replies_fail_the_event(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    nri_buffer rsp = { 0 };
    f->rec.garbage_op = NRI_BUILTIN_OP_CREATE_CONTAINER;
    fixture_add(f, &f->rec, "garbled", "10", 0);
    fixture_start(f);
    assert_fails(create(f, "ctr", &rsp, &err), &err, NRI_STATUS_PLUGIN_FAILED,
                 "CreateContainerResponse");
}

static void same_env_from_two_plugins_conflicts(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    nri_buffer rsp = { 0 };
    f->rec.env_key = f->rec2.env_key = "SHARED";
    f->rec.env_value = "ten";
    f->rec2.env_value = "twenty";
    fixture_add(f, &f->rec, "ten", "10", 0);
    fixture_add(f, &f->rec2, "twenty", "20", 0);
    fixture_start(f);
    assert_fails(create(f, "ctr", &rsp, &err), &err, NRI_STATUS_CONFLICT, "SHARED");
    assert_null(rsp.data);
}

static void configure_error_fails_start(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    f->rec.fail_op = NRI_BUILTIN_OP_CONFIGURE;
    f->rec.fail_message = "bad config";
    fixture_add(f, &f->rec, "unconfigurable", "10", 0);
    fixture_new(f);
    assert_fails(nri_adaptation_start(f->a, &err), &err, NRI_STATUS_START_FAILED, "bad config");
    assert_int_equal(f->rt.syncs, 0);
}

static void unusable_plugins_are_refused_and_finalized(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    nri_builtin_plugin p = recorder_plugin(&f->rec, "ok", "10", 0);
    int freed = 0;

    p.handle = NULL;
    assert_fails(nri_options_add_builtin_plugin(f->opts, &p, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "has no handler");
    /* The user data is owned from the call on, even when it fails. */
    assert_int_equal(f->rec.freed, ++freed);

    p = recorder_plugin(&f->rec, NULL, "10", 0);
    assert_fails(nri_options_add_builtin_plugin(f->opts, &p, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "plugin name is NULL");
    assert_int_equal(f->rec.freed, ++freed);

    p = recorder_plugin(&f->rec, "ok", NULL, 0);
    assert_fails(nri_options_add_builtin_plugin(f->opts, &p, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "plugin index is NULL");
    assert_int_equal(f->rec.freed, ++freed);

    p = recorder_plugin(&f->rec, "", "10", 0);
    assert_fails(nri_options_add_builtin_plugin(f->opts, &p, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "empty name or index");
    assert_int_equal(f->rec.freed, ++freed);

    p = recorder_plugin(&f->rec, "bad\xff", "10", 0);
    assert_fails(nri_options_add_builtin_plugin(f->opts, &p, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "not UTF-8");
    assert_int_equal(f->rec.freed, ++freed);

    p = recorder_plugin(&f->rec, "ok", "10", 0);
    assert_fails(nri_options_add_builtin_plugin(NULL, &p, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "options is NULL");
    assert_int_equal(f->rec.freed, ++freed);

    assert_fails(nri_options_add_builtin_plugin(f->opts, NULL, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "plugin is NULL");

    /* Invalid event bits are refused when the plugin is configured. */
    fixture_add(f, &f->rec2, "bits", "20", (int32_t)0x40000000);
    fixture_new(f);
    assert_fails(nri_adaptation_start(f->a, &err), &err, NRI_STATUS_START_FAILED,
                 "invalid plugin events");
    nri_adaptation_free(f->a);
    f->a = NULL;
    assert_int_equal(f->rec2.freed, 1);
}


int main(void)
{
    harness_init();
    const struct CMUnitTest tests[] = {
        FIXTURE_TEST(plugins_adjust_in_index_order),
        FIXTURE_TEST(subscription_comes_from_the_events_mask),
        FIXTURE_TEST(wants_event_follows_subscriptions_and_validators),
        FIXTURE_TEST(has_plugin_names_the_active_plugins),
        FIXTURE_TEST(a_validator_wants_every_creation),
        FIXTURE_TEST(a_validator_rejects_with_its_reason),
        FIXTURE_TEST(handler_errors_fail_the_event),
        FIXTURE_TEST(undecodable_replies_fail_the_event),
        FIXTURE_TEST(same_env_from_two_plugins_conflicts),
        FIXTURE_TEST(configure_error_fails_start),
        FIXTURE_TEST(unusable_plugins_are_refused_and_finalized),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
