/* The metrics callbacks (nri_options_set_metrics) and the deprecation
 * recorder (nri_options_set_deprecation_recorder): what they are told,
 * from which thread, and that their user data is finalized. */
#include "harness.h"
#include "wire_plugin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WAIT_MS 60000
#define MAGIC 0x4d455452u

typedef struct metrics_seen {
    uint32_t magic;
    pthread_mutex_t lock;
    int invocations, failed_invocations, latencies, adjustments, counts, freed;
    char last_plugin[64], last_op[64], last_error[256];
    uint64_t last_nanos;
    int adjust_was_null;
    char adjust_env[64];
    size_t adjust_updates;
    size_t plugin_count;
    /* Deprecations. */
    int deprecations;
    nri_deprecation deprecation;
    char dep_plugin[64], dep_details[256];
    int off_main;
} metrics_seen;

static void on_invocation(void *ud, const char *plugin, const char *op, const char *error)
{
    metrics_seen *m = ud;
    TH_CHECK(m->magic == MAGIC && plugin && op);
    pthread_mutex_lock(&m->lock);
    m->invocations++;
    m->off_main += !th_on_main();
    snprintf(m->last_plugin, sizeof m->last_plugin, "%s", plugin);
    snprintf(m->last_op, sizeof m->last_op, "%s", op);
    snprintf(m->last_error, sizeof m->last_error, "%s", error ? error : "");
    m->failed_invocations += error != NULL;
    pthread_mutex_unlock(&m->lock);
}

static void on_latency(void *ud, const char *plugin, const char *op, uint64_t nanos)
{
    metrics_seen *m = ud;
    TH_CHECK(m->magic == MAGIC && plugin && op);
    pthread_mutex_lock(&m->lock);
    m->latencies++;
    m->last_nanos = nanos;
    pthread_mutex_unlock(&m->lock);
}

static void on_adjustments(void *ud, const char *plugin, const char *op, const uint8_t *adjustment,
                           size_t len, size_t updates, size_t evictions)
{
    metrics_seen *m = ud;
    TH_CHECK(m->magic == MAGIC && plugin && op);
    TH_CHECK(evictions == 0);
    pthread_mutex_lock(&m->lock);
    m->adjustments++;
    m->adjust_was_null = adjustment == NULL;
    if (!adjustment || !msg_adjust_env(adjustment, len, "FROM_C", m->adjust_env, sizeof m->adjust_env))
        m->adjust_env[0] = '\0';
    m->adjust_updates = updates;
    pthread_mutex_unlock(&m->lock);
}

static void on_plugin_count(void *ud, size_t count)
{
    metrics_seen *m = ud;
    TH_CHECK(m->magic == MAGIC);
    pthread_mutex_lock(&m->lock);
    m->counts++;
    m->plugin_count = count;
    pthread_mutex_unlock(&m->lock);
}

static void on_deprecation(void *ud, nri_deprecation d, const char *plugin, const char *details)
{
    metrics_seen *m = ud;
    TH_CHECK(m->magic == MAGIC && plugin && details);
    pthread_mutex_lock(&m->lock);
    m->deprecations++;
    m->off_main += !th_on_main();
    m->deprecation = d;
    snprintf(m->dep_plugin, sizeof m->dep_plugin, "%s", plugin);
    snprintf(m->dep_details, sizeof m->dep_details, "%s", details);
    pthread_mutex_unlock(&m->lock);
}

static void on_free(void *ud)
{
    metrics_seen *m = ud;
    TH_CHECK(m->magic == MAGIC);
    pthread_mutex_lock(&m->lock);
    m->freed++;
    pthread_mutex_unlock(&m->lock);
}

static void seen_init(metrics_seen *m)
{
    memset(m, 0, sizeof *m);
    m->magic = MAGIC;
    pthread_mutex_init(&m->lock, NULL);
}

static nri_metrics all_metrics(metrics_seen *m)
{
    nri_metrics t = { on_invocation, on_latency, on_adjustments, on_plugin_count, m, on_free };
    return t;
}

static void metrics_see_every_plugin_call(void **state)
{
    fixture *f = *state;
    recorder *rec = &f->rec;
    metrics_seen *m = fixture_keep(f, sizeof *m, NULL);
    nri_error *err = NULL;
    seen_init(m);
    rec->env_key = "FROM_C";
    rec->env_value = "metrics";
    rec->update_ctr = "other";
    rec->update_shares = 10;

    nri_metrics table = all_metrics(m);
    assert_ok(nri_options_set_metrics(f->opts, &table, &err), &err);
    /* The table is copied: changing ours afterwards changes nothing. */
    table.invocation = NULL;
    fixture_add(f, rec, "rec", "10", 0);
    nri_adaptation *a = fixture_start(f);
    assert_int_equal(m->plugin_count, 1);

    pb req = { 0 };
    nri_buffer rsp = { 0 };
    msg_container_request(&req, "pod0", "ctr0", "ctr0");
    /* Synchronize reported its updates (and no adjustment) already. */
    assert_int_equal(m->adjustments, 1);
    assert_true(m->adjust_was_null);
    assert_int_equal(m->adjust_updates, 1);
    int before = m->invocations;
    assert_ok(nri_adaptation_create_container(a, req.data, req.len, &rsp, &err), &err);
    nri_buffer_free(&rsp);
    /* CreateContainer, then ValidateContainerAdjustment. */
    assert_true(m->invocations >= before + 2);
    assert_true(m->latencies >= 2);
    assert_true(m->last_nanos > 0);
    assert_int_equal(m->adjustments, 2);
    assert_false(m->adjust_was_null);
    assert_string_equal(m->adjust_env, "metrics");
    assert_int_equal(m->adjust_updates, 1);

    /* UpdateContainer has updates but never an adjustment: NULL. */
    assert_ok(nri_adaptation_update_container(a, req.data, req.len, &rsp, &err), &err);
    nri_buffer_free(&rsp);
    assert_int_equal(m->adjustments, 3);
    assert_true(m->adjust_was_null);
    assert_string_equal(m->last_plugin, "10-rec");
    assert_string_equal(m->last_op, "UpdateContainer");
    assert_string_equal(m->last_error, "");
    pb_free(&req);

    /* A failed call is an invocation with its error. */
    rec->fail_op = NRI_BUILTIN_OP_RUN_POD_SANDBOX;
    rec->fail_message = "pod refused";
    msg_pod_request(&req, "pod0");
    assert_fails(nri_adaptation_run_pod_sandbox(a, req.data, req.len, &err), &err,
                 NRI_STATUS_PLUGIN_FAILED, "pod refused");
    assert_int_equal(m->failed_invocations, 1);
    assert_string_equal(m->last_op, "RunPodSandbox");
    assert_non_null(strstr(m->last_error, "pod refused"));
    pb_free(&req);
    assert_true(m->off_main > 0);

    assert_int_equal(m->freed, 0);
    nri_adaptation_free(a);
    f->a = NULL;
    assert_int_equal(m->freed, 1);
}

static void metrics_callbacks_may_be_null(void **state)
{
    fixture *f = *state;
    metrics_seen *m = fixture_keep(f, sizeof *m, NULL);
    nri_error *err = NULL;
    seen_init(m);
    nri_metrics none = { NULL, NULL, NULL, NULL, m, on_free };
    assert_ok(nri_options_set_metrics(f->opts, &none, &err), &err);
    fixture_add(f, &f->rec, "rec", "10", 0);
    nri_adaptation *a = fixture_start(f);
    pb req = { 0 };
    nri_buffer rsp = { 0 };
    msg_container_request(&req, "pod0", "ctr0", "ctr0");
    assert_ok(nri_adaptation_create_container(a, req.data, req.len, &rsp, &err), &err);
    nri_buffer_free(&rsp);
    pb_free(&req);
    nri_adaptation_free(a);
    f->a = NULL;
    assert_int_equal(m->freed, 1);
}

static void deprecation_recorder_hears_of_state_change(void **state)
{
    fixture *f = *state;
    metrics_seen *m = fixture_keep(f, sizeof *m, NULL);
    nri_error *err = NULL;
    char sock[512];
    seen_init(m);

    fixture_external(f);
    assert_ok(nri_options_set_deprecation_recorder(f->opts, on_deprecation, m, on_free, &err),
              &err);
    nri_adaptation *a = fixture_start(f);

    /* An old plugin: subscribed to RunPodSandbox, without its RPC. */
    wire_plugin *old = fixture_keep(f, sizeof *old, wire_plugin_release);
    old->name = "oldie";
    old->idx = "10";
    old->events = EVENT_BIT(NRI_BUILTIN_OP_RUN_POD_SANDBOX);
    old->unimplemented = EVENT_BIT(NRI_BUILTIN_OP_RUN_POD_SANDBOX);
    tmp_join(sock, sizeof sock, &f->dir, "nri.sock");
    assert_int_equal(wire_plugin_start(old, sock), 0);
    /* Registered and synchronized through the runtime's sync callback. */
    assert_true(runtime_wait(&f->rt, &f->rt.syncs, 2, WAIT_MS));
    assert_int_equal(atomic_load(&old->registered), 1);

    pb req = { 0 };
    msg_pod_request(&req, "pod0");
    /* The plugin becomes active once its sync returned: until then, the
     * event does not reach it. */
    for (int i = 0; i < WAIT_MS / 20 && atomic_load(&old->state_changes) == 0; i++) {
        assert_ok(nri_adaptation_run_pod_sandbox(a, req.data, req.len, &err), &err);
        if (atomic_load(&old->state_changes) == 0)
            sleep_ms(20);
    }
    assert_int_equal(atomic_load(&old->state_changes), 1);
    assert_int_equal(m->deprecations, 1);
    assert_int_equal(m->deprecation, NRI_DEPRECATION_STATE_CHANGE);
    assert_string_equal(m->dep_plugin, "10-oldie");
    assert_non_null(strstr(m->dep_details, "RunPodSandbox"));
    /* Where the event ran: one plugin's on the thread that called it. */
    assert_int_equal(m->off_main, 0);

    /* Told once per plugin and event; StateChange goes on being used. */
    assert_ok(nri_adaptation_run_pod_sandbox(a, req.data, req.len, &err), &err);
    assert_int_equal(atomic_load(&old->state_changes), 2);
    assert_int_equal(m->deprecations, 1);
    pb_free(&req);

    nri_adaptation_free(a);
    f->a = NULL;
    wire_plugin_stop(old);
    assert_int_equal(atomic_load(&old->protocol_errors), 0);
    assert_int_equal(m->freed, 1);
}

static void bad_tables_are_refused_and_user_data_finalized(void **state)
{
    (void)state;
    metrics_seen m;
    nri_error *err = NULL;
    seen_init(&m);
    nri_options *opts = nri_options_new();
    nri_metrics table = all_metrics(&m);

    assert_fails(nri_options_set_metrics(opts, NULL, &err), &err, NRI_STATUS_INVALID_ARGUMENT,
                 "metrics is NULL");
    assert_fails(nri_options_set_metrics(NULL, &table, &err), &err, NRI_STATUS_INVALID_ARGUMENT,
                 "options is NULL");
    assert_int_equal(m.freed, 1);
    assert_fails(nri_options_set_deprecation_recorder(opts, NULL, &m, on_free, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "record is NULL");
    assert_int_equal(m.freed, 2);
    assert_fails(nri_options_set_deprecation_recorder(NULL, on_deprecation, &m, on_free, &err),
                 &err, NRI_STATUS_INVALID_ARGUMENT, "options is NULL");
    assert_int_equal(m.freed, 3);

    /* Set twice: the first table's user data goes when it is replaced. */
    assert_ok(nri_options_set_metrics(opts, &table, &err), &err);
    assert_ok(nri_options_set_metrics(opts, &table, &err), &err);
    assert_int_equal(m.freed, 4);
    assert_ok(nri_options_set_deprecation_recorder(opts, on_deprecation, &m, NULL, &err), &err);
    nri_options_free(opts);
    assert_int_equal(m.freed, 5);
}

/* What the audit callback heard: the records' JSON, and when freed. */
typedef struct audit_seen {
    uint32_t magic;
    pthread_mutex_t lock;
    int records, freed, bad_len;
    char last[4096];
} audit_seen;

static void on_audit(void *ud, const char *json, size_t len)
{
    audit_seen *s = ud;
    TH_CHECK(s->magic == MAGIC && json);
    pthread_mutex_lock(&s->lock);
    s->records++;
    s->bad_len += strlen(json) != len;
    snprintf(s->last, sizeof s->last, "%s", json);
    pthread_mutex_unlock(&s->lock);
}

static void on_audit_free(void *ud)
{
    audit_seen *s = ud;
    TH_CHECK(s->magic == MAGIC);
    pthread_mutex_lock(&s->lock);
    s->freed++;
    pthread_mutex_unlock(&s->lock);
}

static int audit_records(audit_seen *s)
{
    pthread_mutex_lock(&s->lock);
    int n = s->records;
    pthread_mutex_unlock(&s->lock);
    return n;
}

/* The audit log: setters refuse NULL and nonsense; a builtin plugin's
 * change reaches the callback as one JSON record naming the field, the
 * key and the plugin, with the value since asked for, and the same line
 * reaches the file; the user data is freed with the adaptation, after the
 * last record. */
static void audit_callback_and_file_get_each_record(void **state)
{
    fixture *f = *state;
    audit_seen *s = fixture_keep(f, sizeof *s, NULL);
    nri_error *err = NULL;
    char path[512];
    s->magic = MAGIC;
    pthread_mutex_init(&s->lock, NULL);

    assert_fails(nri_options_set_audit_callback(NULL, on_audit, NULL, NULL, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "options");
    assert_fails(nri_options_set_audit_callback(f->opts, NULL, s, on_audit_free, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "record");
    assert_int_equal(s->freed, 1);
    s->freed = 0;
    assert_fails(nri_options_set_audit_file(f->opts, NULL, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "path");
    assert_fails(nri_options_set_audit_record_limit(f->opts, 10, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "below 256");
    assert_fails(nri_options_set_audit_env_values(NULL, true, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "options");

    tmp_join(path, sizeof path, &f->dir, "audit.jsonl");
    assert_ok(nri_options_set_audit_callback(f->opts, on_audit, s, on_audit_free, &err), &err);
    assert_ok(nri_options_set_audit_file(f->opts, path, &err), &err);
    assert_ok(nri_options_set_audit_env_values(f->opts, true, &err), &err);
    assert_ok(nri_options_set_audit_record_limit(f->opts, 4096, &err), &err);
    f->rec.env_key = "TOKEN";
    f->rec.env_value = "s3cr3t";
    fixture_add(f, &f->rec, "rec", "10", 0);
    nri_adaptation *a = fixture_start(f);

    pb req = { 0 };
    nri_buffer rsp = { 0 };
    msg_container_request(&req, "pod0", "ctr0", "ctr0");
    assert_ok(nri_adaptation_create_container(a, req.data, req.len, &rsp, &err), &err);
    nri_buffer_free(&rsp);
    pb_free(&req);
    for (int i = 0; i < WAIT_MS / 10 && audit_records(s) == 0; i++)
        sleep_ms(10);
    assert_int_equal(audit_records(s), 1);
    /* Copied under the lock, asserted outside it: a failed assertion goes
     * on to the teardown, which frees the adaptation and so takes the lock. */
    char last[sizeof s->last];
    pthread_mutex_lock(&s->lock);
    int bad_len = s->bad_len;
    memcpy(last, s->last, sizeof last);
    pthread_mutex_unlock(&s->lock);
    assert_int_equal(bad_len, 0);
    assert_non_null(strstr(last, "\"event\":\"CreateContainer\""));
    assert_non_null(strstr(last, "{\"container\":\"ctr0\",\"field\":\"Env\",\"key\":\"TOKEN\","
                                 "\"plugin\":\"10-rec\"}"));
    assert_non_null(strstr(last, "{\"key\":\"TOKEN\",\"value\":\"s3cr3t\"}"));
    assert_non_null(strstr(last, "{\"name\":\"10-rec\",\"origin\":\"builtin\"}"));

    nri_adaptation_free(a);
    f->a = NULL;
    assert_int_equal(s->freed, 1);
    char *text = read_file(path);
    assert_non_null(text);
    size_t n = strlen(text);
    assert_true(n > 0 && text[n - 1] == '\n');
    text[n - 1] = '\0';
    assert_string_equal(text, s->last);
    free(text);
    pthread_mutex_destroy(&s->lock);
}

int main(void)
{
    harness_init();
    const struct CMUnitTest tests[] = {
        FIXTURE_TEST(metrics_see_every_plugin_call),
        FIXTURE_TEST(metrics_callbacks_may_be_null),
        FIXTURE_TEST(deprecation_recorder_hears_of_state_change),
        TEST(bad_tables_are_refused_and_user_data_finalized),
        FIXTURE_TEST(audit_callback_and_file_get_each_record),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
