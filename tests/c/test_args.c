/* NULL and garbage for every function of include/nri.h: each refuses
 * with NRI_STATUS_INVALID_ARGUMENT (or INVALID_MESSAGE for bytes that are
 * no message) and a message naming the argument, writes no output, still
 * takes ownership where it says it does, and leaves the library usable. */
#include "harness.h"

#include <stdio.h>
#include <string.h>

static const uint8_t GARBAGE[] = { 0xff, 0xff, 0xff, 0xff };
/* A length-delimited field claiming more bytes than there are. */
static const uint8_t TRUNCATED[] = { 0x0a, 0x10, 'p', 'o', 'd' };

/* ---- Events, through a table: the calls themselves are in test_events.c. */

typedef nri_status (*event_fn)(const nri_adaptation *, const uint8_t *, size_t, nri_error **);
typedef nri_status (*event_rsp_fn)(const nri_adaptation *, const uint8_t *, size_t, nri_buffer *,
                                   nri_error **);

static const struct {
    const char *name;
    event_fn plain;
    event_rsp_fn with_rsp;
} EVENTS[] = {
    { "RunPodSandboxRequest", nri_adaptation_run_pod_sandbox, NULL },
    { "UpdatePodSandboxRequest", NULL, nri_adaptation_update_pod_sandbox },
    { "PostUpdatePodSandboxRequest", nri_adaptation_post_update_pod_sandbox, NULL },
    { "StopPodSandboxRequest", nri_adaptation_stop_pod_sandbox, NULL },
    { "RemovePodSandboxRequest", nri_adaptation_remove_pod_sandbox, NULL },
    { "CreateContainerRequest", NULL, nri_adaptation_create_container },
    { "PostCreateContainerRequest", nri_adaptation_post_create_container, NULL },
    { "StartContainerRequest", nri_adaptation_start_container, NULL },
    { "PostStartContainerRequest", nri_adaptation_post_start_container, NULL },
    { "UpdateContainerRequest", NULL, nri_adaptation_update_container },
    { "PostUpdateContainerRequest", nri_adaptation_post_update_container, NULL },
    { "StopContainerRequest", NULL, nri_adaptation_stop_container },
    { "RemoveContainerRequest", nri_adaptation_remove_container, NULL },
};
#define N_EVENTS (sizeof EVENTS / sizeof *EVENTS)

static nri_status call_event(size_t i, const nri_adaptation *a, const uint8_t *req, size_t len,
                             nri_buffer *rsp, nri_error **err)
{
    return EVENTS[i].plain ? EVENTS[i].plain(a, req, len, err)
                           : EVENTS[i].with_rsp(a, req, len, rsp, err);
}

static void every_event_refuses_bad_arguments(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    nri_adaptation *a = fixture_start(f);
    pb pod_req = { 0 }, ctr_req = { 0 };
    msg_pod_request(&pod_req, "pod0");
    msg_container_request(&ctr_req, "pod0", "ctr0", "ctr0");

    for (size_t i = 0; i < N_EVENTS; i++) {
        /* The first five are pod events, with {pod} requests. */
        const pb good = i < 5 ? pod_req : ctr_req;
        nri_buffer untouched = { (uint8_t *)&untouched, 3 }, rsp = untouched;
        print_message("   %s\n", EVENTS[i].name);
        assert_fails(call_event(i, NULL, good.data, good.len, &rsp, &err), &err,
                     NRI_STATUS_INVALID_ARGUMENT, "adaptation is NULL");
        assert_fails(call_event(i, a, NULL, 5, &rsp, &err), &err, NRI_STATUS_INVALID_ARGUMENT,
                     "is NULL but its length is 5");
        assert_fails(call_event(i, a, GARBAGE, sizeof GARBAGE, &rsp, &err), &err,
                     NRI_STATUS_INVALID_MESSAGE, EVENTS[i].name);
        assert_fails(call_event(i, a, TRUNCATED, sizeof TRUNCATED, &rsp, &err), &err,
                     NRI_STATUS_INVALID_MESSAGE, EVENTS[i].name);
        /* No error slot: the status alone. */
        assert_int_equal(call_event(i, a, GARBAGE, sizeof GARBAGE, &rsp, NULL),
                         NRI_STATUS_INVALID_MESSAGE);
        /* Outputs are written only on success. */
        assert_memory_equal(&rsp, &untouched, sizeof rsp);
        if (EVENTS[i].with_rsp)
            assert_fails(EVENTS[i].with_rsp(a, good.data, good.len, NULL, &err), &err,
                         NRI_STATUS_INVALID_ARGUMENT, "response is NULL");
        /* And the adaptation is as good as before. */
        rsp.data = NULL;
        rsp.len = 0;
        assert_ok(call_event(i, a, good.data, good.len, &rsp, &err), &err);
        nri_buffer_free(&rsp);
    }

    pb_free(&pod_req);
    pb_free(&ctr_req);
}

static void lifecycle_functions_refuse_null(void **state)
{
    (void)state;
    nri_error *err = NULL;
    nri_plugin_sync_block *block = NULL;
    assert_fails(nri_adaptation_start(NULL, &err), &err, NRI_STATUS_INVALID_ARGUMENT,
                 "adaptation is NULL");
    assert_fails(nri_adaptation_stop(NULL, &err), &err, NRI_STATUS_INVALID_ARGUMENT,
                 "adaptation is NULL");
    assert_fails(nri_adaptation_block_plugin_sync(NULL, &block, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "adaptation is NULL");
    assert_null(block);

    runtime rt;
    runtime_init(&rt);
    nri_adaptation *a = new_adaptation(&rt, NULL);
    assert_fails(nri_adaptation_block_plugin_sync(a, NULL, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "out is NULL");
    nri_adaptation_free(a);
    runtime_destroy(&rt);
}

/* nri_adaptation_new with one bad argument: refused, `*out` untouched,
 * and both the options (holding a builtin plugin) and the callbacks' user
 * data consumed. */
enum { KEEP_BOTH, DROP_SYNC, DROP_UPDATE };

static void assert_new_refused(const char *name, const char *version, int drop,
                               int null_callbacks, int null_out, const char *text)
{
    runtime rt;
    recorder rec;
    nri_error *err = NULL;
    runtime_init(&rt);
    recorder_init(&rec);
    nri_options *opts = nri_options_new();
    nri_builtin_plugin p = recorder_plugin(&rec, "rec", "10", 0);
    assert_ok(nri_options_add_builtin_plugin(opts, &p, &err), &err);
    nri_callbacks cbs = runtime_callbacks(&rt);
    if (drop == DROP_SYNC)
        cbs.sync = NULL;
    if (drop == DROP_UPDATE)
        cbs.update = NULL;
    nri_adaptation *sentinel = (nri_adaptation *)&rt, *a = sentinel;
    assert_fails(nri_adaptation_new(name, version, null_callbacks ? NULL : &cbs, opts,
                                    null_out ? NULL : &a, &err),
                 &err, NRI_STATUS_INVALID_ARGUMENT, text);
    assert_ptr_equal(a, sentinel);
    assert_int_equal(rec.freed, 1);
    assert_int_equal(rt.freed, null_callbacks ? 0 : 1);
    recorder_destroy(&rec);
    runtime_destroy(&rt);
}

static void new_refuses_bad_arguments(void **state)
{
    (void)state;
    assert_new_refused(NULL, "1.0", KEEP_BOTH, 0, 0, "name is NULL");
    assert_new_refused("c-test", NULL, KEEP_BOTH, 0, 0, "version is NULL");
    assert_new_refused("c-\xc3\x28", "1.0", KEEP_BOTH, 0, 0, "name is not UTF-8");
    assert_new_refused("c-test", "1.0", DROP_SYNC, 0, 0, "callbacks.sync is NULL");
    assert_new_refused("c-test", "1.0", DROP_UPDATE, 0, 0, "callbacks.update is NULL");
    assert_new_refused("c-test", "1.0", KEEP_BOTH, 1, 0, "callbacks is NULL");
    assert_new_refused("c-test", "1.0", KEEP_BOTH, 0, 1, "out is NULL");
}

static void option_setters_refuse_bad_arguments(void **state)
{
    (void)state;
    nri_error *err = NULL;
    nri_options *o = nri_options_new();
    assert_non_null(o);

    typedef nri_status (*path_setter)(nri_options *, const char *, nri_error **);
    static const struct {
        path_setter set;
        const char *what;
    } paths[] = {
        { nri_options_set_plugin_path, "plugin path" },
        { nri_options_set_plugin_config_path, "plugin config path" },
        { nri_options_set_socket_path, "socket path" },
    };
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
        assert_fails(paths[i].set(NULL, "/tmp", &err), &err, NRI_STATUS_INVALID_ARGUMENT,
                     "options is NULL");
        assert_fails(paths[i].set(o, NULL, &err), &err, NRI_STATUS_INVALID_ARGUMENT, "is NULL");
        assert_fails(paths[i].set(o, "", &err), &err, NRI_STATUS_INVALID_ARGUMENT, "is empty");
        assert_fails(paths[i].set(o, "/tmp/\xff", &err), &err, NRI_STATUS_INVALID_ARGUMENT,
                     "is not UTF-8");
        assert_int_equal(paths[i].set(o, NULL, NULL), NRI_STATUS_INVALID_ARGUMENT);
    }
    assert_fails(nri_options_disable_external_connections(NULL, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "options is NULL");
    assert_fails(nri_options_set_registration_timeout(NULL, 1, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "options is NULL");
    assert_fails(nri_options_set_request_timeout(NULL, 1, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "options is NULL");
    assert_fails(nri_options_set_default_validator(NULL, "", &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "options is NULL");
    assert_fails(nri_options_set_default_validator(o, NULL, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "config is NULL");
    assert_fails(nri_options_set_default_validator(o, "enable: yes please: no", &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "invalid default validator config");
    assert_fails(nri_options_set_default_validator(o, "enable: 17", &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "invalid default validator config");
    assert_fails(nri_options_set_nri_version(NULL, "v1", &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "options is NULL");
    assert_fails(nri_options_set_nri_version(o, NULL, &err), &err, NRI_STATUS_INVALID_ARGUMENT,
                 "version is NULL");
    assert_fails(nri_options_set_nri_version(o, "v\xfe", &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "not UTF-8");
    assert_fails(nri_options_set_wasm_cache_dir(NULL, "/tmp", &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "options is NULL");
    assert_fails(nri_options_set_wasm_cache_dir(o, NULL, &err), &err, NRI_STATUS_INVALID_ARGUMENT,
                 "dir is NULL");
    assert_fails(nri_options_set_wasm_cache_dir(o, "/tmp/\xff", &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "not UTF-8");
    /* Empty: no cache, which is not an error. */
    assert_ok(nri_options_set_wasm_cache_dir(o, "", &err), &err);
    assert_ok(nri_options_set_wasm_cache_dir(o, "/var/cache/nri/wasm", &err), &err);
    /* Huge timeouts are taken as they are. */
    assert_ok(nri_options_set_registration_timeout(o, UINT64_MAX, &err), &err);
    assert_ok(nri_options_set_request_timeout(o, UINT64_MAX, &err), &err);
    /* (nri_options_add_builtin_plugin, _set_metrics and
     * _set_deprecation_recorder: test_builtin.c and test_metrics.c.) */
    nri_options_free(o);
}

static void process_wide_timeouts_take_any_value(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    nri_set_plugin_registration_timeout(UINT64_MAX);
    nri_set_plugin_request_timeout(UINT64_MAX);
    fixture_add(f, &f->rec, "rec", "10", 0);
    nri_adaptation *a = fixture_start(f);
    pb req = { 0 };
    msg_pod_request(&req, "pod0");
    assert_ok(nri_adaptation_run_pod_sandbox(a, req.data, req.len, &err), &err);
    pb_free(&req);
    nri_set_plugin_registration_timeout(5000);
    nri_set_plugin_request_timeout(2000);
}

static void errors_and_buffers_accept_null(void **state)
{
    (void)state;
    assert_int_equal(nri_error_status(NULL), NRI_STATUS_INVALID_ARGUMENT);
    assert_string_equal(nri_error_message(NULL), "");
    nri_error_free(NULL);
    nri_buffer_free(NULL);
    assert_string_equal(nri_status_name(NRI_STATUS_CANCELED + 1), "unknown status");
    assert_string_equal(nri_status_name(UINT32_MAX), "unknown status");
    assert_non_null(nri_version());
    assert_non_null(nri_api_version());
}

/* ---- Bad arguments from inside callbacks ------------------------------ */

typedef struct inside {
    nri_status null_updates, null_state, garbage_state, truncated_state, empty_state;
    nri_status stream_null_sizes, stream_null_encode, stream_huge_size, stream_empty;
    char stream_msgs[3][128];
    nri_status reply_null_data, reply_null_message, reply_bad_utf8, reply_null_reply_data,
        reply_null_reply_error;
    char null_updates_msg[128];
    int calls;
} inside;

static void never_encode(void *ud, size_t pf, size_t pt, size_t cf, size_t ct, uint8_t *out,
                         size_t len, nri_reply *reply)
{
    (void)ud, (void)out, (void)reply;
    /* Only the empty state gets this far: no objects to encode. */
    TH_CHECK(pf == 0 && pt == 0 && cf == 0 && ct == 0 && len == 0);
}

static void bad_sync(void *ud, nri_sync_cb *cb, nri_reply *reply)
{
    inside *s = ud;
    nri_error *err = NULL;
    nri_buffer out = { 0 };
    s->calls++;
    s->null_updates = nri_sync_cb_call(cb, NULL, 0, NULL, &err);
    snprintf(s->null_updates_msg, sizeof s->null_updates_msg, "%s", nri_error_message(err));
    nri_error_free(err);
    s->null_state = nri_sync_cb_call(cb, NULL, 5, &out, NULL);
    s->garbage_state = nri_sync_cb_call(cb, GARBAGE, sizeof GARBAGE, &out, NULL);
    s->truncated_state = nri_sync_cb_call(cb, TRUNCATED, sizeof TRUNCATED, &out, NULL);
    TH_CHECK(out.data == NULL && out.len == 0);
    /* (NULL, 0) is an empty runtime: no pods, no containers. */
    s->empty_state = nri_sync_cb_call(cb, NULL, 0, &out, NULL);
    nri_buffer_free(&out);

    size_t sizes[2] = { 10, (size_t)1 << 40 };
    s->stream_null_sizes = nri_sync_cb_stream(cb, NULL, 1, NULL, 0, never_encode, s, &out, &err);
    snprintf(s->stream_msgs[0], sizeof s->stream_msgs[0], "%s", nri_error_message(err));
    nri_error_free(err);
    s->stream_null_encode = nri_sync_cb_stream(cb, sizes, 1, NULL, 0, NULL, s, &out, &err);
    snprintf(s->stream_msgs[1], sizeof s->stream_msgs[1], "%s", nri_error_message(err));
    nri_error_free(err);
    s->stream_huge_size = nri_sync_cb_stream(cb, NULL, 0, sizes, 2, never_encode, s, &out, &err);
    snprintf(s->stream_msgs[2], sizeof s->stream_msgs[2], "%s", nri_error_message(err));
    nri_error_free(err);
    err = NULL;
    TH_CHECK(out.data == NULL && out.len == 0);
    /* No objects: one empty message, which needs no encoding. */
    s->stream_empty = nri_sync_cb_stream(cb, NULL, 0, NULL, 0, never_encode, s, &out, NULL);
    nri_buffer_free(&out);

    s->reply_null_data = nri_reply_set_data(reply, NULL, 4);
    s->reply_null_message = nri_reply_set_error(reply, NULL);
    s->reply_bad_utf8 = nri_reply_set_error(reply, "bad \xff");
    s->reply_null_reply_data = nri_reply_set_data(NULL, GARBAGE, 1);
    s->reply_null_reply_error = nri_reply_set_error(NULL, "x");
    /* None of that touched the reply: the sync succeeds. */
}

static void ignore_update(void *ud, const uint8_t *req, size_t len, nri_reply *reply)
{
    (void)ud, (void)req, (void)len, (void)reply;
}

static void callbacks_get_refusals_too(void **state)
{
    (void)state;
    tmpdir d;
    inside s;
    nri_error *err = NULL;
    memset(&s, 0, sizeof s);
    tmp_make(&d);
    nri_callbacks cbs = { bad_sync, ignore_update, &s, NULL };
    nri_adaptation *a = NULL;
    assert_ok(nri_adaptation_new("c-test", "1.0", &cbs, test_options(&d, 0), &a, &err), &err);
    assert_ok(nri_adaptation_start(a, &err), &err);
    nri_adaptation_free(a);

    assert_int_equal(s.calls, 1);
    assert_int_equal(s.null_updates, NRI_STATUS_INVALID_ARGUMENT);
    assert_string_equal(s.null_updates_msg, "updates is NULL");
    assert_int_equal(s.null_state, NRI_STATUS_INVALID_ARGUMENT);
    assert_int_equal(s.garbage_state, NRI_STATUS_INVALID_MESSAGE);
    assert_int_equal(s.truncated_state, NRI_STATUS_INVALID_MESSAGE);
    assert_int_equal(s.empty_state, NRI_STATUS_OK);
    assert_int_equal(s.stream_null_sizes, NRI_STATUS_INVALID_ARGUMENT);
    assert_string_equal(s.stream_msgs[0], "pod_sizes is NULL but its length is 1");
    assert_int_equal(s.stream_null_encode, NRI_STATUS_INVALID_ARGUMENT);
    assert_string_equal(s.stream_msgs[1], "encode is NULL");
    assert_int_equal(s.stream_huge_size, NRI_STATUS_INVALID_ARGUMENT);
    assert_string_equal(s.stream_msgs[2],
                        "container_sizes[1] is 1099511627776: no encoded object is that large");
    assert_int_equal(s.stream_empty, NRI_STATUS_OK);
    assert_int_equal(s.reply_null_data, NRI_STATUS_INVALID_ARGUMENT);
    assert_int_equal(s.reply_null_message, NRI_STATUS_INVALID_ARGUMENT);
    assert_int_equal(s.reply_bad_utf8, NRI_STATUS_INVALID_ARGUMENT);
    assert_int_equal(s.reply_null_reply_data, NRI_STATUS_INVALID_ARGUMENT);
    assert_int_equal(s.reply_null_reply_error, NRI_STATUS_INVALID_ARGUMENT);

    /* Outside a callback there is no nri_sync_cb to have. */
    nri_buffer out = { 0 };
    assert_fails(nri_sync_cb_call(NULL, NULL, 0, &out, &err), &err, NRI_STATUS_INVALID_ARGUMENT,
                 "cb is NULL");
    assert_fails(nri_sync_cb_stream(NULL, NULL, 0, NULL, 0, never_encode, NULL, &out, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "cb is NULL");
    tmp_remove(&d);
}

int main(void)
{
    harness_init();
    const struct CMUnitTest tests[] = {
        FIXTURE_TEST(every_event_refuses_bad_arguments),
        TEST(lifecycle_functions_refuse_null),
        TEST(new_refuses_bad_arguments),
        TEST(option_setters_refuse_bad_arguments),
        FIXTURE_TEST(process_wide_timeouts_take_any_value),
        TEST(errors_and_buffers_accept_null),
        TEST(callbacks_get_refusals_too),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
