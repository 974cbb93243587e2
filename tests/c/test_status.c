/* Every nri_status a C caller can get, produced at least once, with the
 * error object agreeing with the returned status; and nri_status_name.
 *
 * One status is not reachable from C: NRI_STATUS_PANIC (9), a panic
 * inside nri-rs caught at the boundary. No input may cause one: that is
 * the point of the boundary, so a test that produced it would have found
 * a bug (crates/nri-capi/src/error.rs tests the mapping itself from Rust).
 * NRI_STATUS_CALLBACK_FAILED (7) comes from a sync callback failing
 * nri_adaptation_start; an update callback's error goes back to the plugin
 * that asked instead (see test_runtime_callbacks.c). NRI_STATUS_INVALID_SPEC
 * (10) and NRI_STATUS_SPEC_REFUSED (11) come from the spec generator. */
#include "harness.h"

#include <string.h>

/* The highest status this version knows. */
#define LAST_STATUS NRI_STATUS_SPEC_REFUSED

static int produced[LAST_STATUS + 1];

/* Checks a call's outcome, records its status, frees and clears *errp
 * (read here, after the call: not an argument evaluated beside it). */
static void got(nri_status st, nri_error **errp, nri_status want)
{
    nri_error *err = *errp;
    *errp = NULL;
    assert_int_equal(st, want);
    if (want == NRI_STATUS_OK) {
        assert_null(err);
    } else {
        assert_non_null(err);
        assert_int_equal(nri_error_status(err), st);
        assert_true(strlen(nri_error_message(err)) > 0);
        nri_error_free(err);
    }
    produced[st]++;
}

static nri_status create(nri_adaptation *a, nri_error **err)
{
    pb req = { 0 };
    nri_buffer rsp = { 0 };
    msg_container_request(&req, "pod0", "ctr0", "ctr0");
    nri_status st = nri_adaptation_create_container(a, req.data, req.len, &rsp, err);
    nri_buffer_free(&rsp);
    pb_free(&req);
    return st;
}

static void every_reachable_status_is_produced(void **state)
{
    fixture *f = *state;
    recorder *r1 = &f->rec, *r2 = &f->rec2;
    nri_error *err = NULL;
    static const uint8_t garbage[] = { 0xff, 0xff };

    fixture_add(f, r1, "one", "10", 0);
    fixture_add(f, r2, "two", "20", 0);
    nri_adaptation *a = fixture_new(f);
    got(create(a, &err), &err, NRI_STATUS_NOT_RUNNING);
    f->rt.sync_error = "runtime says no";
    got(nri_adaptation_start(a, &err), &err, NRI_STATUS_CALLBACK_FAILED);
    f->rt.sync_error = NULL;
    assert_ok(nri_adaptation_start(a, &err), &err);
    got(create(a, &err), &err, NRI_STATUS_OK);
    got(nri_adaptation_start(NULL, &err), &err, NRI_STATUS_INVALID_ARGUMENT);
    got(nri_adaptation_run_pod_sandbox(a, garbage, sizeof garbage, &err), &err,
        NRI_STATUS_INVALID_MESSAGE);
    got(nri_adaptation_start(a, &err), &err, NRI_STATUS_START_FAILED);

    r1->fail_op = NRI_BUILTIN_OP_CREATE_CONTAINER;
    r1->fail_message = "plugin one failed";
    got(create(a, &err), &err, NRI_STATUS_PLUGIN_FAILED);
    r1->fail_message = NULL;

    r1->env_key = r2->env_key = "SAME";
    r1->env_value = "1";
    r2->env_value = "2";
    got(create(a, &err), &err, NRI_STATUS_CONFLICT);
    r2->env_key = NULL;

    r2->fail_op = NRI_BUILTIN_OP_VALIDATE_CONTAINER_ADJUSTMENT;
    r2->fail_message = "not this one";
    got(create(a, &err), &err, NRI_STATUS_REJECTED);

    /* The spec generator: a spec that is not JSON; an rlimit type the OCI
     * spec has no name for (ContainerAdjustment.rlimits = 7, type = 1). */
    nri_spec_generator *g = nri_spec_generator_new();
    nri_buffer spec = { 0 };
    static const char json[] = "{\"ociVersion\":\"1.2.0\"}";
    pb adj = { 0 }, rlimit = { 0 };
    pb_string(&rlimit, 1, "nofile");
    pb_message(&adj, 7, &rlimit);
    got(nri_spec_adjust(g, (const uint8_t *)"{", 1, NULL, 0, &spec, NULL, &err), &err,
        NRI_STATUS_INVALID_SPEC);
    got(nri_spec_adjust(g, (const uint8_t *)json, strlen(json), adj.data, adj.len, &spec, NULL,
                        &err), &err, NRI_STATUS_SPEC_REFUSED);
    assert_null(spec.data);
    pb_free(&adj);
    nri_spec_generator_free(g);

    for (nri_status s = NRI_STATUS_OK; s <= LAST_STATUS; s++) {
        int reachable = s != NRI_STATUS_PANIC;
        if (reachable && !produced[s])
            fail_msg("status %u (%s) was not produced", (unsigned)s, nri_status_name(s));
    }
}

static void every_status_has_a_name(void **state)
{
    (void)state;
    static const char *const names[] = {
        "ok", "invalid argument", "invalid message", "not running", "plugin failed",
        "conflict", "rejected", "callback failed", "start failed", "panic",
        "invalid spec", "spec refused", "canceled",
    };
    for (uint32_t s = 0; s <= NRI_STATUS_CANCELED; s++)
        assert_string_equal(nri_status_name(s), names[s]);
    /* Numbers this version does not know, as a newer library might send. */
    assert_string_equal(nri_status_name(NRI_STATUS_CANCELED + 1), "unknown status");
    assert_string_equal(nri_status_name(UINT32_MAX), "unknown status");
    /* Static strings: the same pointer every time. */
    assert_ptr_equal(nri_status_name(NRI_STATUS_OK), nri_status_name(NRI_STATUS_OK));
}

int main(void)
{
    harness_init();
    const struct CMUnitTest tests[] = {
        FIXTURE_TEST(every_reachable_status_is_produced),
        TEST(every_status_has_a_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
