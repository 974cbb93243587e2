/* Every event function round-trips a protobuf message built in C: the
 * request reaches a builtin plugin (re-encoded by the library) with its
 * fields intact, and responses decode in C to what the plugin answered. */
#include "harness.h"

#include <string.h>

/* The fixture's recorder, subscribed to every event (validation
 * included), answering CreateContainer with env FROM_C=yes and
 * CreateContainer, UpdateContainer and StopContainer with an update of
 * "other-ctr". */
static int setup(void **state)
{
    fixture_setup(state);
    fixture *f = *state;
    f->rec.env_key = "FROM_C";
    f->rec.env_value = "yes";
    f->rec.update_ctr = "other-ctr";
    f->rec.update_shares = 2048;
    fixture_add(f, &f->rec, "recorder", "10", 0);
    fixture_start(f);
    return 0;
}

/* The plugin saw `op` last with these pod and container ids. */
static const seen_call *assert_seen(fixture *f, nri_builtin_op op, const char *pod, const char *ctr)
{
    const seen_call *c = recorder_last(&f->rec, op);
    char got_pod[128], got_ctr[128];
    assert_non_null(c);
    assert_true(c->off_main);
    assert_true(msg_ids(c->req, c->len, got_pod, got_ctr));
    assert_string_equal(got_pod, pod);
    assert_string_equal(got_ctr, ctr);
    return c;
}

static void run_pod_sandbox(void **state)
{
    fixture *f = *state;
    pb req = { 0 };
    nri_error *err = NULL;
    msg_pod_request(&req, "pod-run");
    assert_ok(nri_adaptation_run_pod_sandbox(f->a, req.data, req.len, &err), &err);
    const seen_call *c = assert_seen(f, NRI_BUILTIN_OP_RUN_POD_SANDBOX, "pod-run", "");
    /* Relayed unchanged: the very bytes built here. */
    assert_int_equal(c->len, req.len);
    assert_memory_equal(c->req, req.data, req.len);
    pb_free(&req);
}

static void update_pod_sandbox(void **state)
{
    fixture *f = *state;
    pb req = { 0 }, res = { 0 };
    nri_error *err = NULL;
    nri_buffer rsp = { (uint8_t *)&rsp, 99 }; /* overwritten on success */
    msg_pod_request(&req, "pod-upd");
    msg_cpu_resources(&res, 512);
    pb_message(&req, F_UPDATE_POD_RESOURCES, &res);
    assert_ok(nri_adaptation_update_pod_sandbox(f->a, req.data, req.len, &rsp, &err), &err);
    /* UpdatePodSandboxResponse has no fields: the empty buffer. */
    assert_null(rsp.data);
    assert_int_equal(rsp.len, 0);
    nri_buffer_free(&rsp);
    const seen_call *c = assert_seen(f, NRI_BUILTIN_OP_UPDATE_POD_SANDBOX, "pod-upd", "");
    static const uint32_t path[] = { F_UPDATE_POD_RESOURCES, F_RES_CPU, F_CPU_SHARES };
    const uint8_t *shares;
    size_t len;
    pb_field v;
    assert_true(pb_path(c->req, c->len, path, 3, &shares, &len));
    assert_true(pb_get(shares, len, F_OPT_VALUE, 0, &v));
    assert_int_equal(v.varint, 512);
    pb_free(&req);
}

static void post_update_pod_sandbox(void **state)
{
    fixture *f = *state;
    pb req = { 0 };
    nri_error *err = NULL;
    msg_pod_request(&req, "pod-postupd");
    assert_ok(nri_adaptation_post_update_pod_sandbox(f->a, req.data, req.len, &err), &err);
    assert_seen(f, NRI_BUILTIN_OP_POST_UPDATE_POD_SANDBOX, "pod-postupd", "");
    pb_free(&req);
}

static void stop_pod_sandbox(void **state)
{
    fixture *f = *state;
    pb req = { 0 };
    nri_error *err = NULL;
    msg_pod_request(&req, "pod-stop");
    assert_ok(nri_adaptation_stop_pod_sandbox(f->a, req.data, req.len, &err), &err);
    assert_seen(f, NRI_BUILTIN_OP_STOP_POD_SANDBOX, "pod-stop", "");
    pb_free(&req);
}

static void remove_pod_sandbox(void **state)
{
    fixture *f = *state;
    pb req = { 0 };
    nri_error *err = NULL;
    msg_pod_request(&req, "pod-rm");
    assert_ok(nri_adaptation_remove_pod_sandbox(f->a, req.data, req.len, &err), &err);
    assert_seen(f, NRI_BUILTIN_OP_REMOVE_POD_SANDBOX, "pod-rm", "");
    pb_free(&req);
}

static void create_container(void **state)
{
    fixture *f = *state;
    pb req = { 0 };
    nri_error *err = NULL;
    nri_buffer rsp = { 0 };
    char value[64], ctr[128];
    const uint8_t *adj;
    size_t adj_len;
    pb_field upd;
    msg_container_request(&req, "pod0", "ctr-create", "create");
    assert_ok(nri_adaptation_create_container(f->a, req.data, req.len, &rsp, &err), &err);
    assert_non_null(rsp.data);

    /* The plugin's adjustment and update, merged, as a
     * CreateContainerResponse. */
    static const uint32_t adjust[] = { F_CREATE_RSP_ADJUST };
    assert_true(pb_path(rsp.data, rsp.len, adjust, 1, &adj, &adj_len));
    assert_true(msg_adjust_env(adj, adj_len, "FROM_C", value, sizeof value));
    assert_string_equal(value, "yes");
    assert_int_equal(pb_count(rsp.data, rsp.len, F_CREATE_RSP_UPDATE), 1);
    assert_true(pb_get(rsp.data, rsp.len, F_CREATE_RSP_UPDATE, 0, &upd));
    assert_int_equal(msg_update_cpu_shares(upd.data, upd.len, ctr, sizeof ctr), 2048);
    assert_string_equal(ctr, "other-ctr");
    nri_buffer_free(&rsp);
    assert_null(rsp.data);

    assert_seen(f, NRI_BUILTIN_OP_CREATE_CONTAINER, "pod0", "ctr-create");
    /* The plugin validated its own merged adjustment. */
    const seen_call *v = assert_seen(f, NRI_BUILTIN_OP_VALIDATE_CONTAINER_ADJUSTMENT, "pod0",
                                     "ctr-create");
    static const uint32_t vadjust[] = { F_VALIDATE_ADJUST };
    assert_true(pb_path(v->req, v->len, vadjust, 1, &adj, &adj_len));
    assert_true(msg_adjust_env(adj, adj_len, "FROM_C", value, sizeof value));
    assert_int_equal(pb_count(v->req, v->len, F_VALIDATE_PLUGINS), 1);
    pb_free(&req);
}

static void post_create_container(void **state)
{
    fixture *f = *state;
    pb req = { 0 };
    nri_error *err = NULL;
    msg_container_request(&req, "pod0", "ctr-postcreate", "c");
    assert_ok(nri_adaptation_post_create_container(f->a, req.data, req.len, &err), &err);
    assert_seen(f, NRI_BUILTIN_OP_POST_CREATE_CONTAINER, "pod0", "ctr-postcreate");
    pb_free(&req);
}

static void start_container(void **state)
{
    fixture *f = *state;
    pb req = { 0 };
    nri_error *err = NULL;
    msg_container_request(&req, "pod0", "ctr-start", "c");
    assert_ok(nri_adaptation_start_container(f->a, req.data, req.len, &err), &err);
    assert_seen(f, NRI_BUILTIN_OP_START_CONTAINER, "pod0", "ctr-start");
    pb_free(&req);
}

static void post_start_container(void **state)
{
    fixture *f = *state;
    pb req = { 0 };
    nri_error *err = NULL;
    msg_container_request(&req, "pod0", "ctr-poststart", "c");
    assert_ok(nri_adaptation_post_start_container(f->a, req.data, req.len, &err), &err);
    assert_seen(f, NRI_BUILTIN_OP_POST_START_CONTAINER, "pod0", "ctr-poststart");
    pb_free(&req);
}

static void update_container(void **state)
{
    fixture *f = *state;
    pb req = { 0 }, res = { 0 };
    nri_error *err = NULL;
    nri_buffer rsp = { 0 };
    char ctr[128];
    pb_field upd;
    msg_container_request(&req, "pod0", "ctr-update", "c");
    msg_cpu_resources(&res, 256);
    pb_message(&req, F_UPDATE_CTR_RESOURCES, &res);
    assert_ok(nri_adaptation_update_container(f->a, req.data, req.len, &rsp, &err), &err);

    /* The plugin's update of the other container, then the target's own
     * (merged) update last. */
    int n = pb_count(rsp.data, rsp.len, F_UPDATE_RSP_UPDATE);
    assert_true(n >= 1);
    int found = 0;
    for (int i = 0; i < n; i++) {
        assert_true(pb_get(rsp.data, rsp.len, F_UPDATE_RSP_UPDATE, (size_t)i, &upd));
        if (msg_update_cpu_shares(upd.data, upd.len, ctr, sizeof ctr) == 2048)
            found += strcmp(ctr, "other-ctr") == 0;
    }
    assert_int_equal(found, 1);
    nri_buffer_free(&rsp);

    const seen_call *c = assert_seen(f, NRI_BUILTIN_OP_UPDATE_CONTAINER, "pod0", "ctr-update");
    static const uint32_t path[] = { F_UPDATE_CTR_RESOURCES, F_RES_CPU, F_CPU_SHARES };
    const uint8_t *shares;
    size_t len;
    pb_field v;
    assert_true(pb_path(c->req, c->len, path, 3, &shares, &len));
    assert_true(pb_get(shares, len, F_OPT_VALUE, 0, &v));
    assert_int_equal(v.varint, 256);
    pb_free(&req);
}

static void post_update_container(void **state)
{
    fixture *f = *state;
    pb req = { 0 };
    nri_error *err = NULL;
    msg_container_request(&req, "pod0", "ctr-postupdate", "c");
    assert_ok(nri_adaptation_post_update_container(f->a, req.data, req.len, &err), &err);
    assert_seen(f, NRI_BUILTIN_OP_POST_UPDATE_CONTAINER, "pod0", "ctr-postupdate");
    pb_free(&req);
}

static void stop_container(void **state)
{
    fixture *f = *state;
    pb req = { 0 };
    nri_error *err = NULL;
    nri_buffer rsp = { 0 };
    char ctr[128];
    pb_field upd;
    msg_container_request(&req, "pod0", "ctr-stop", "c");
    assert_ok(nri_adaptation_stop_container(f->a, req.data, req.len, &rsp, &err), &err);
    assert_int_equal(pb_count(rsp.data, rsp.len, F_STOP_RSP_UPDATE), 1);
    assert_true(pb_get(rsp.data, rsp.len, F_STOP_RSP_UPDATE, 0, &upd));
    assert_int_equal(msg_update_cpu_shares(upd.data, upd.len, ctr, sizeof ctr), 2048);
    assert_string_equal(ctr, "other-ctr");
    nri_buffer_free(&rsp);
    assert_seen(f, NRI_BUILTIN_OP_STOP_CONTAINER, "pod0", "ctr-stop");
    pb_free(&req);
}

static void remove_container(void **state)
{
    fixture *f = *state;
    pb req = { 0 };
    nri_error *err = NULL;
    msg_container_request(&req, "pod0", "ctr-rm", "c");
    assert_ok(nri_adaptation_remove_container(f->a, req.data, req.len, &err), &err);
    assert_seen(f, NRI_BUILTIN_OP_REMOVE_CONTAINER, "pod0", "ctr-rm");
    pb_free(&req);
}

static void empty_requests_are_valid_messages(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    nri_buffer rsp = { 0 };
    /* (NULL, 0) is the empty message: every field at its default. */
    assert_ok(nri_adaptation_run_pod_sandbox(f->a, NULL, 0, &err), &err);
    assert_seen(f, NRI_BUILTIN_OP_RUN_POD_SANDBOX, "", "");
    assert_ok(nri_adaptation_create_container(f->a, NULL, 0, &rsp, &err), &err);
    nri_buffer_free(&rsp);
}

static void startup_configured_and_synchronized_the_plugin(void **state)
{
    fixture *f = *state;
    /* Configure, then Synchronize with the state the sync callback built. */
    assert_true(f->rec.n >= 2);
    assert_int_equal(f->rec.calls[0].op, NRI_BUILTIN_OP_CONFIGURE);
    assert_int_equal(f->rec.calls[1].op, NRI_BUILTIN_OP_SYNCHRONIZE);
    const seen_call *s = &f->rec.calls[1];
    pb_field pod, ctr;
    char id[128];
    assert_int_equal(pb_count(s->req, s->len, F_SYNC_PODS), 1);
    assert_true(pb_get(s->req, s->len, F_SYNC_PODS, 0, &pod));
    assert_true(pb_get_string(pod.data, pod.len, F_POD_ID, id, sizeof id));
    assert_string_equal(id, "pod0");
    assert_true(pb_get(s->req, s->len, F_SYNC_CONTAINERS, 0, &ctr));
    assert_true(pb_get_string(ctr.data, ctr.len, F_CTR_ID, id, sizeof id));
    assert_string_equal(id, "ctr0");
    assert_int_equal(f->rt.syncs, 1);
}

static void finalizers_run_once_at_free(void **state)
{
    fixture *f = *state;
    nri_adaptation_free(f->a);
    f->a = NULL;
    assert_int_equal(f->rec.freed, 1);
    assert_int_equal(f->rt.freed, 1);
}

#define EVENT_TEST(fn) cmocka_unit_test_setup_teardown(fn, setup, fixture_teardown)

int main(void)
{
    harness_init();
    const struct CMUnitTest tests[] = {
        EVENT_TEST(startup_configured_and_synchronized_the_plugin),
        EVENT_TEST(run_pod_sandbox),
        EVENT_TEST(update_pod_sandbox),
        EVENT_TEST(post_update_pod_sandbox),
        EVENT_TEST(stop_pod_sandbox),
        EVENT_TEST(remove_pod_sandbox),
        EVENT_TEST(create_container),
        EVENT_TEST(post_create_container),
        EVENT_TEST(start_container),
        EVENT_TEST(post_start_container),
        EVENT_TEST(update_container),
        EVENT_TEST(post_update_container),
        EVENT_TEST(stop_container),
        EVENT_TEST(remove_container),
        EVENT_TEST(empty_requests_are_valid_messages),
        EVENT_TEST(finalizers_run_once_at_free),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
