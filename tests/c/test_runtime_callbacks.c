/* The runtime's sync and update callbacks: called from the library's
 * threads with their user_data intact, their results used, their errors
 * propagated. (Checks inside the callbacks are TH_CHECKs in harness.c,
 * collected and asserted on the main thread after every test.) */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
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
    /* Asserted outside the lock, which the teardown may need. */
    pthread_mutex_lock(&f->rt.lock);
    char ctr[sizeof f->rt.update_ctr];
    memcpy(ctr, f->rt.update_ctr, sizeof ctr);
    uint64_t shares = f->rt.update_shares;
    int off_main = f->rt.off_main;
    pthread_mutex_unlock(&f->rt.lock);
    assert_string_equal(ctr, "ctr0");
    assert_int_equal(shares, 123);
    assert_int_equal(off_main, 2); /* the sync and this update */
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

/* ---- nri_sync_cb_stream: the state encoded a message at a time -------- */

/* One pod and 40 containers of ~256 KiB: over 4 MiB, so split in chunks. */
#define STREAM_CTRS 40
#define STREAM_ID_LEN (128 << 10)

typedef struct streamed {
    pb objects[1 + STREAM_CTRS]; /* the pod, then the containers, encoded */
    size_t pod_sizes[1], ctr_sizes[STREAM_CTRS];
    int stream;                  /* 1: nri_sync_cb_stream, 0: nri_sync_cb_call */
    int lie;                     /* the encoder puts an object in field 9 */
    const char *encode_error;    /* the encoder fails with this */
    int encodes;
    nri_status status;
    char message[256];
} streamed;

static void streamed_init(streamed *s)
{
    memset(s, 0, sizeof *s);
    char *id = malloc(STREAM_ID_LEN + 1);
    assert_non_null(id);
    memset(id, 'x', STREAM_ID_LEN);
    id[STREAM_ID_LEN] = '\0';
    msg_pod(&s->objects[0], "pod0");
    s->pod_sizes[0] = s->objects[0].len;
    for (int i = 0; i < STREAM_CTRS; i++) {
        char name[16];
        int n = snprintf(name, sizeof name, "ctr%02d", i);
        memcpy(id, name, (size_t)n);
        msg_container(&s->objects[1 + i], "pod0", id, id);
        s->ctr_sizes[i] = s->objects[1 + i].len;
    }
    free(id);
}

static void streamed_destroy(streamed *s)
{
    for (int i = 0; i < 1 + STREAM_CTRS; i++)
        pb_free(&s->objects[i]);
}

/* The state's fields for pods [pf, pt) and containers [cf, ct). */
static void streamed_fields(streamed *s, pb *out, size_t pf, size_t pt, size_t cf, size_t ct)
{
    for (size_t i = pf; i < pt; i++)
        pb_bytes(out, F_SYNC_PODS, s->objects[i].data, s->objects[i].len);
    for (size_t i = cf; i < ct; i++)
        pb_bytes(out, F_SYNC_CONTAINERS, s->objects[1 + i].data, s->objects[1 + i].len);
}

static void stream_encode(void *ud, size_t pf, size_t pt, size_t cf, size_t ct, uint8_t *out,
                          size_t len, nri_reply *reply)
{
    streamed *s = ud;
    s->encodes++;
    TH_CHECK(pf <= pt && pt <= 1 && cf <= ct && ct <= STREAM_CTRS);
    if (s->encode_error) {
        TH_CHECK(nri_reply_set_error(reply, s->encode_error) == NRI_STATUS_OK);
        return;
    }
    pb fields = { 0 };
    streamed_fields(s, &fields, pf, pt, cf, ct);
    TH_CHECK(fields.len == len);
    memcpy(out, fields.data, len < fields.len ? len : fields.len);
    if (s->lie)
        out[0] = 9 << 3 | 2; /* the first object in an unknown field */
    pb_free(&fields);
}

static void stream_sync(void *ud, nri_sync_cb *cb, nri_reply *reply)
{
    streamed *s = ud;
    nri_buffer updates = { 0 };
    nri_error *err = NULL;
    if (s->stream) {
        s->status = nri_sync_cb_stream(cb, s->pod_sizes, 1, s->ctr_sizes, STREAM_CTRS,
                                       stream_encode, s, &updates, &err);
    } else {
        pb state = { 0 };
        streamed_fields(s, &state, 0, 1, 0, STREAM_CTRS);
        s->status = nri_sync_cb_call(cb, state.data, state.len, &updates, &err);
        pb_free(&state);
    }
    snprintf(s->message, sizeof s->message, "%s", nri_error_message(err));
    if (s->status != NRI_STATUS_OK)
        TH_CHECK(nri_reply_set_error(reply, nri_error_message(err)) == NRI_STATUS_OK);
    nri_error_free(err);
    nri_buffer_free(&updates);
}

static void no_update(void *ud, const uint8_t *req, size_t len, nri_reply *reply)
{
    (void)ud, (void)req, (void)len, (void)reply;
}

/* Starts an adaptation whose only plugin is recorder `r`, synchronized
 * as `s` says; the status of nri_adaptation_start, its message in `msg`. */
static nri_status start_streamed(fixture *f, recorder *r, streamed *s, char *msg, size_t cap)
{
    nri_error *err = NULL;
    nri_options *o = test_options(&f->dir, 0);
    nri_builtin_plugin p = recorder_plugin(r, "recorder", "10", 0);
    assert_ok(nri_options_add_builtin_plugin(o, &p, &err), &err);
    nri_callbacks cbs = { stream_sync, no_update, s, NULL };
    nri_adaptation *a = NULL;
    assert_ok(nri_adaptation_new("c-test", "1.0", &cbs, o, &a, &err), &err);
    nri_status st = nri_adaptation_start(a, &err);
    snprintf(msg, cap, "%s", nri_error_message(err));
    nri_error_free(err);
    nri_adaptation_free(a);
    return st;
}

static void sync_cb_stream_sends_what_sync_cb_call_sends(void **state)
{
    fixture *f = *state;
    char msg[256];
    streamed s;
    streamed_init(&s);
    assert_int_equal(start_streamed(f, &f->rec, &s, msg, sizeof msg), NRI_STATUS_OK);
    s.stream = 1;
    assert_int_equal(start_streamed(f, &f->rec2, &s, msg, sizeof msg), NRI_STATUS_OK);
    assert_int_equal(s.status, NRI_STATUS_OK);

    /* Split as the whole state would be, message for message, byte for
     * byte, each message encoded once. */
    int n = recorder_count(&f->rec, NRI_BUILTIN_OP_SYNCHRONIZE);
    assert_true(n >= 3);
    assert_int_equal(recorder_count(&f->rec2, NRI_BUILTIN_OP_SYNCHRONIZE), n);
    assert_int_equal(s.encodes, n);
    int containers = 0;
    for (int i = 0, j = 0; i < f->rec.n; i++) {
        const seen_call *want = &f->rec.calls[i];
        if (want->op != NRI_BUILTIN_OP_SYNCHRONIZE)
            continue;
        while (f->rec2.calls[j].op != NRI_BUILTIN_OP_SYNCHRONIZE)
            j++;
        const seen_call *got = &f->rec2.calls[j++];
        assert_int_equal(got->len, want->len);
        assert_memory_equal(got->req, want->req, want->len);
        containers += pb_count(got->req, got->len, F_SYNC_CONTAINERS);
    }
    assert_int_equal(containers, STREAM_CTRS);
    streamed_destroy(&s);
}

static void sync_cb_stream_refuses_what_does_not_match_the_sizes(void **state)
{
    fixture *f = *state;
    char msg[256];
    streamed s;
    streamed_init(&s);
    s.stream = 1;
    s.lie = 1;
    /* Refused before the plugin sees it; the runtime's callback fails. */
    assert_int_equal(start_streamed(f, &f->rec, &s, msg, sizeof msg), NRI_STATUS_CALLBACK_FAILED);
    assert_int_equal(s.status, NRI_STATUS_INVALID_MESSAGE);
    assert_non_null(strstr(s.message, "invalid SynchronizeRequest"));
    assert_non_null(strstr(msg, "does not hold those objects at the sizes given"));
    assert_int_equal(recorder_count(&f->rec, NRI_BUILTIN_OP_SYNCHRONIZE), 0);

    /* The encoder's own error is the sync's. */
    s.lie = 0;
    s.encode_error = "runtime state went away";
    assert_int_equal(start_streamed(f, &f->rec2, &s, msg, sizeof msg), NRI_STATUS_CALLBACK_FAILED);
    assert_int_equal(s.status, NRI_STATUS_CALLBACK_FAILED);
    assert_string_equal(s.message, "runtime state went away");
    assert_int_equal(recorder_count(&f->rec2, NRI_BUILTIN_OP_SYNCHRONIZE), 0);
    streamed_destroy(&s);
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
        FIXTURE_TEST(sync_cb_stream_sends_what_sync_cb_call_sends),
        FIXTURE_TEST(sync_cb_stream_refuses_what_does_not_match_the_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
