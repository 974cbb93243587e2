/* The runtime's sync and update callbacks: called from the library's
 * threads with their user_data intact, their results used, their errors
 * propagated. (Checks inside the callbacks are TH_CHECKs in harness.c,
 * collected and asserted on the main thread after every test.) */
#include "harness.h"

#include <stdio.h>
#include <string.h>

#define WAIT_MS 60000

/* An adaptation with the recorder as builtin plugin "10-recorder". */
static void with_recorder(fixture *f)
{
    fixture_add(f, &f->rec, "recorder", "10", 0);
    fixture_new(f);
}

static void sync_runs_on_another_thread_with_its_user_data(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    f->rec.update_ctr = "ctr0";
    f->rec.update_shares = 100;
    with_recorder(f);
    assert_ok(nri_adaptation_start(f->a, &err), &err);
    assert_int_equal(f->rt.syncs, 1);
    assert_int_equal(f->rt.off_main, 1);
    /* nri_sync_cb_call handed back the plugin's update for the runtime to
     * apply. */
    assert_int_equal(f->rt.sync_status, NRI_STATUS_OK);
    assert_int_equal(f->rt.sync_updates, 1);
    assert_int_equal(recorder_count(&f->rec, NRI_BUILTIN_OP_SYNCHRONIZE), 1);
}

static void sync_error_fails_start(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    with_recorder(f);
    f->rt.sync_error = "runtime state is locked";
    assert_fails(nri_adaptation_start(f->a, &err), &err, NRI_STATUS_CALLBACK_FAILED,
                 "runtime state is locked");
    /* Not started: events are refused. */
    pb req = { 0 };
    msg_pod_request(&req, "pod0");
    assert_fails(nri_adaptation_run_pod_sandbox(f->a, req.data, req.len, &err), &err,
                 NRI_STATUS_NOT_RUNNING, NULL);
    /* The runtime recovers: the next start synchronizes again. */
    f->rt.sync_error = NULL;
    assert_ok(nri_adaptation_start(f->a, &err), &err);
    assert_int_equal(f->rt.syncs, 2);
    assert_ok(nri_adaptation_run_pod_sandbox(f->a, req.data, req.len, &err), &err);
    assert_non_null(recorder_last(&f->rec, NRI_BUILTIN_OP_RUN_POD_SANDBOX));
    pb_free(&req);
}

static void sync_cb_call_rejects_a_garbage_state(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    with_recorder(f);
    f->rt.sync_garbage = 1;
    /* The sync callback hands the error of nri_sync_cb_call on. */
    assert_fails(nri_adaptation_start(f->a, &err), &err, NRI_STATUS_CALLBACK_FAILED,
                 "invalid SynchronizeRequest");
    assert_int_equal(f->rt.sync_status, NRI_STATUS_INVALID_MESSAGE);
    assert_non_null(strstr(f->rt.sync_message, "invalid SynchronizeRequest"));
    assert_int_equal(recorder_count(&f->rec, NRI_BUILTIN_OP_SYNCHRONIZE), 0);
}

static void a_plugin_failing_sync_is_dropped(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    f->rec.fail_op = NRI_BUILTIN_OP_SYNCHRONIZE;
    f->rec.fail_message = "cannot sync";
    with_recorder(f);
    /* As upstream: the plugin is closed, start goes on without it. */
    assert_ok(nri_adaptation_start(f->a, &err), &err);
    assert_int_equal(f->rt.sync_status, NRI_STATUS_OK);
    pb req = { 0 };
    msg_pod_request(&req, "pod0");
    assert_ok(nri_adaptation_run_pod_sandbox(f->a, req.data, req.len, &err), &err);
    assert_null(recorder_last(&f->rec, NRI_BUILTIN_OP_RUN_POD_SANDBOX));
    pb_free(&req);
}

/* ---- Unsolicited updates from a real plugin ----------------------------
 * nri-interop-plugin (tests/tools) with update_on_start asks for an update
 * of the container it sees started: cpu.shares 123. It records the outcome
 * as a JSON line in its record file. */

static void interop_with_updates(fixture *f, char *record, size_t cap)
{
    char config[1024];
    nri_error *err = NULL;
    tmp_join(record, cap, &f->dir, "record.jsonl");
    snprintf(config, sizeof config, "{\"update_on_start\": true, \"record\": \"%s\"}", record);
    install_plugin(&f->dir, "nri-interop-plugin", "10-interop", config);
    fixture_start(f);
    assert_true(wait_for_text(record, "\"Synchronize\"", WAIT_MS));

    pb req = { 0 };
    msg_container_request(&req, "pod0", "ctr0", "ctr0");
    assert_ok(nri_adaptation_start_container(f->a, req.data, req.len, &err), &err);
    pb_free(&req);
}

static void update_callback_gets_the_plugins_request(void **state)
{
    fixture *f = *state;
    char record[512];
    interop_with_updates(f, record, sizeof record);
    assert_true(runtime_wait(&f->rt, &f->rt.updates, 1, WAIT_MS));
    assert_true(wait_for_text(record, "\"UpdateContainersResult\"", WAIT_MS));
    pthread_mutex_lock(&f->rt.lock);
    assert_string_equal(f->rt.update_ctr, "ctr0");
    assert_int_equal(f->rt.update_shares, 123);
    assert_int_equal(f->rt.off_main, 2); /* the sync and this update */
    pthread_mutex_unlock(&f->rt.lock);
    /* An untouched reply is a success with no failed updates. */
    assert_true(wait_for_text(record, "\"failed\":0", WAIT_MS));
}

static void update_callback_reports_failed_updates(void **state)
{
    fixture *f = *state;
    char record[512];
    f->rt.fail_first_update = 1;
    interop_with_updates(f, record, sizeof record);
    assert_true(runtime_wait(&f->rt, &f->rt.updates, 1, WAIT_MS));
    /* The UpdateContainersResponse built in C reached the plugin. */
    assert_true(wait_for_text(record, "\"failed\":1", WAIT_MS));
}

static void update_callback_errors_reach_the_plugin(void **state)
{
    fixture *f = *state;
    char record[512];
    f->rt.update_error = "container is gone";
    interop_with_updates(f, record, sizeof record);
    assert_true(runtime_wait(&f->rt, &f->rt.updates, 1, WAIT_MS));
    assert_true(wait_for_text(record, "container is gone", WAIT_MS));
}


int main(void)
{
    harness_init();
    const struct CMUnitTest tests[] = {
        FIXTURE_TEST(sync_runs_on_another_thread_with_its_user_data),
        FIXTURE_TEST(sync_error_fails_start),
        FIXTURE_TEST(sync_cb_call_rejects_a_garbage_state),
        FIXTURE_TEST(a_plugin_failing_sync_is_dropped),
        FIXTURE_TEST(update_callback_gets_the_plugins_request),
        FIXTURE_TEST(update_callback_reports_failed_updates),
        FIXTURE_TEST(update_callback_errors_reach_the_plugin),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
