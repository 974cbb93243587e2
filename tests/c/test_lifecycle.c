/* Handle lifecycle: new, start, stop, free; NULL frees; what a stopped or
 * never started adaptation answers; finalizers run exactly once. (A failed
 * new, consuming its options and user data: test_args.c.) */
#include "harness.h"

#include <string.h>

/* A pod event, the cheapest way to ask "are you running?". */
static nri_status run_pod(nri_adaptation *a, nri_error **err)
{
    pb req = { 0 };
    msg_pod_request(&req, "pod0");
    nri_status st = nri_adaptation_run_pod_sandbox(a, req.data, req.len, err);
    pb_free(&req);
    return st;
}

static void new_start_stop_free(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    size_t threads = nri_core_threads();
    nri_adaptation *a = fixture_new(f);
    /* The core's thread runs from new on (it counts itself as it starts). */
    for (int i = 0; i < 1000 && nri_core_threads() == threads; i++)
        sleep_ms(1);
    assert_true(nri_core_threads() > threads);
    assert_int_equal(f->rt.syncs, 0);
    assert_ok(nri_adaptation_start(a, &err), &err);
    /* Start synchronizes the (here: no) plugins through the sync callback,
     * from one of the library's threads. */
    assert_int_equal(f->rt.syncs, 1);
    assert_int_equal(f->rt.off_main, 1);
    assert_int_equal(f->rt.sync_status, NRI_STATUS_OK);
    assert_ok(run_pod(a, &err), &err);
    assert_ok(nri_adaptation_stop(a, &err), &err);
    /* Stop ends the core's thread and its blocking pool before it returns. */
    assert_int_equal(nri_core_threads(), threads);
    /* Stopping a stopped adaptation does nothing. */
    assert_ok(nri_adaptation_stop(a, NULL), &err);
    assert_int_equal(f->rt.freed, 0);
    nri_adaptation_free(a);
    f->a = NULL;
    assert_int_equal(f->rt.freed, 1);
}

static void frees_accept_null(void **state)
{
    (void)state;
    nri_adaptation_free(NULL);
    nri_options_free(NULL);
    nri_error_free(NULL);
    nri_buffer_free(NULL);
    nri_plugin_sync_block_free(NULL);
    /* An empty buffer, freed twice. */
    nri_buffer empty = { NULL, 0 };
    nri_buffer_free(&empty);
    nri_buffer_free(&empty);
    assert_null(empty.data);
    assert_int_equal(empty.len, 0);
}

static void events_need_a_running_adaptation(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    nri_adaptation *a = fixture_new(f);

    assert_fails(run_pod(a, &err), &err, NRI_STATUS_NOT_RUNNING, "not running");
    assert_ok(nri_adaptation_start(a, &err), &err);
    assert_ok(run_pod(a, &err), &err);
    assert_ok(nri_adaptation_stop(a, &err), &err);
    assert_fails(run_pod(a, &err), &err, NRI_STATUS_NOT_RUNNING, "not running");
    /* Without an error slot, the status alone. */
    assert_int_equal(run_pod(a, NULL), NRI_STATUS_NOT_RUNNING);
}

static void start_twice_fails_and_restart_works(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    fixture_external(f);
    nri_adaptation *a = fixture_new(f);

    assert_ok(nri_adaptation_start(a, &err), &err);
    assert_fails(nri_adaptation_start(a, &err), &err, NRI_STATUS_START_FAILED, "already running");
    /* Still running after the refused start. */
    assert_ok(run_pod(a, &err), &err);
    assert_ok(nri_adaptation_stop(a, &err), &err);
    /* Started again after a stop: synchronized again, socket reopened. */
    assert_ok(nri_adaptation_start(a, &err), &err);
    assert_int_equal(f->rt.syncs, 2);
    assert_ok(run_pod(a, &err), &err);
}

static void free_without_start_and_default_options(void **state)
{
    (void)state;
    runtime rt;
    runtime_init(&rt);
    /* NULL options: upstream's defaults. Not started, so nothing under
     * /opt/nri or /var/run/nri is touched. */
    nri_adaptation *a = new_adaptation(&rt, NULL);
    nri_adaptation_free(a);
    assert_int_equal(rt.syncs, 0);
    assert_int_equal(rt.freed, 1);
    runtime_destroy(&rt);
}

static void two_adaptations_are_independent(void **state)
{
    (void)state;
    tmpdir d1, d2;
    runtime rt1, rt2;
    nri_error *err = NULL;
    tmp_make(&d1);
    tmp_make(&d2);
    runtime_init(&rt1);
    runtime_init(&rt2);
    nri_adaptation *a1 = new_adaptation(&rt1, test_options(&d1, 1));
    nri_adaptation *a2 = new_adaptation(&rt2, test_options(&d2, 1));

    assert_ok(nri_adaptation_start(a1, &err), &err);
    assert_ok(nri_adaptation_start(a2, &err), &err);
    assert_ok(nri_adaptation_stop(a1, &err), &err);
    assert_fails(run_pod(a1, &err), &err, NRI_STATUS_NOT_RUNNING, NULL);
    assert_ok(run_pod(a2, &err), &err);
    nri_adaptation_free(a1);
    assert_int_equal(rt1.freed, 1);
    assert_int_equal(rt2.freed, 0);
    assert_ok(run_pod(a2, &err), &err);
    nri_adaptation_free(a2);
    assert_int_equal(rt2.freed, 1);

    runtime_destroy(&rt1);
    runtime_destroy(&rt2);
    tmp_remove(&d1);
    tmp_remove(&d2);
}

static void plugin_sync_block_leaves_events_alone(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    nri_adaptation *a = fixture_start(f);

    nri_plugin_sync_block *b1 = NULL, *b2 = NULL;
    assert_ok(nri_adaptation_block_plugin_sync(a, &b1, &err), &err);
    assert_non_null(b1);
    /* Blocks are shared: a second one does not wait for the first. */
    assert_ok(nri_adaptation_block_plugin_sync(a, &b2, &err), &err);
    assert_non_null(b2);
    assert_ok(run_pod(a, &err), &err);
    nri_plugin_sync_block_free(b1);
    nri_plugin_sync_block_free(b2);
    assert_ok(run_pod(a, &err), &err);

    /* A block may outlive a stop (and its adaptation: test_threads.c). */
    assert_ok(nri_adaptation_block_plugin_sync(a, &b1, &err), &err);
    assert_ok(nri_adaptation_stop(a, &err), &err);
    nri_plugin_sync_block_free(b1);
}

int main(void)
{
    harness_init();
    const struct CMUnitTest tests[] = {
        FIXTURE_TEST(new_start_stop_free),
        TEST(frees_accept_null),
        FIXTURE_TEST(events_need_a_running_adaptation),
        FIXTURE_TEST(start_twice_fails_and_restart_works),
        TEST(free_without_start_and_default_options),
        TEST(two_adaptations_are_independent),
        FIXTURE_TEST(plugin_sync_block_leaves_events_alone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
