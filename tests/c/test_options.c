/* Every option setter has its effect, seen from inside: a builtin
 * plugin's ConfigureRequest carries the runtime name, NRI version and
 * timeouts; the socket appears where asked, or not at all; the plugin
 * directory is scanned; the default validator rejects. */
#include "harness.h"
#include "wire_plugin.h"

/* How long a test waits for a plugin to connect. */
#define WAIT_MS 60000

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Adds the recorder, creates and starts the adaptation. */
static nri_status start_with_recorder(fixture *f, nri_error **err)
{
    fixture_add(f, &f->rec, "rec", "10", 0);
    return nri_adaptation_start(fixture_new(f), err);
}

/* The ConfigureRequest the recorder got. */
static const seen_call *configure_request(fixture *f)
{
    const seen_call *c = recorder_last(&f->rec, NRI_BUILTIN_OP_CONFIGURE);
    assert_non_null(c);
    return c;
}

static uint64_t varint_field(const seen_call *c, uint32_t field)
{
    pb_field v;
    assert_true(pb_get(c->req, c->len, field, 0, &v));
    return v.varint;
}

static void configure_carries_runtime_and_nri_version(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    char s[64];
    assert_ok(nri_options_set_nri_version(f->opts, "v0.99.1", &err), &err);
    assert_ok(start_with_recorder(f, &err), &err);
    const seen_call *c = configure_request(f);
    assert_true(pb_get_string(c->req, c->len, F_CONF_RUNTIME_NAME, s, sizeof s));
    assert_string_equal(s, "c-test");
    assert_true(pb_get_string(c->req, c->len, F_CONF_RUNTIME_VERSION, s, sizeof s));
    assert_string_equal(s, "1.0");
    assert_true(pb_get_string(c->req, c->len, F_CONF_NRI_VERSION, s, sizeof s));
    assert_string_equal(s, "v0.99.1");
}

static void nri_version_defaults_to_the_api_version(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    char s[64];
    assert_ok(start_with_recorder(f, &err), &err);
    const seen_call *c = configure_request(f);
    assert_true(pb_get_string(c->req, c->len, F_CONF_NRI_VERSION, s, sizeof s));
    assert_string_equal(s, nri_api_version());
}

enum { F_CONF_REGISTRATION_TIMEOUT = 4, F_CONF_REQUEST_TIMEOUT = 5 };

static void per_adaptation_timeouts_win(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    nri_set_plugin_registration_timeout(4321);
    nri_set_plugin_request_timeout(8765);
    assert_ok(nri_options_set_registration_timeout(f->opts, 1234, &err), &err);
    assert_ok(nri_options_set_request_timeout(f->opts, 5678, &err), &err);
    assert_ok(start_with_recorder(f, &err), &err);
    const seen_call *c = configure_request(f);
    assert_int_equal(varint_field(c, F_CONF_REGISTRATION_TIMEOUT), 1234);
    assert_int_equal(varint_field(c, F_CONF_REQUEST_TIMEOUT), 5678);
}

static void zero_keeps_the_process_wide_timeouts(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    nri_set_plugin_registration_timeout(4321);
    nri_set_plugin_request_timeout(8765);
    assert_ok(nri_options_set_registration_timeout(f->opts, 0, &err), &err);
    assert_ok(nri_options_set_request_timeout(f->opts, 0, &err), &err);
    assert_ok(start_with_recorder(f, &err), &err);
    const seen_call *c = configure_request(f);
    assert_int_equal(varint_field(c, F_CONF_REGISTRATION_TIMEOUT), 4321);
    assert_int_equal(varint_field(c, F_CONF_REQUEST_TIMEOUT), 8765);
    /* Upstream's defaults back: 5 s and 2 s. */
    nri_set_plugin_registration_timeout(5000);
    nri_set_plugin_request_timeout(2000);
}

/* A builtin plugin that takes its time over RunPodSandbox. */
static void slow_handler(void *ud, nri_builtin_op op, const uint8_t *req, size_t len,
                         nri_reply *reply)
{
    (void)req, (void)len, (void)reply;
    TH_CHECK(ud == NULL);
    if (op == NRI_BUILTIN_OP_RUN_POD_SANDBOX)
        sleep_ms(1500);
}

static void request_timeout_fails_slow_plugins(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    nri_builtin_plugin slow = { "slow", "10", 0, slow_handler, NULL, NULL };
    assert_ok(nri_options_set_request_timeout(f->opts, 200, &err), &err);
    assert_ok(nri_options_add_builtin_plugin(f->opts, &slow, &err), &err);
    fixture_new(f);
    assert_ok(nri_adaptation_start(f->a, &err), &err);
    pb req = { 0 };
    msg_pod_request(&req, "pod0");
    assert_fails(nri_adaptation_run_pod_sandbox(f->a, req.data, req.len, &err), &err,
                 NRI_STATUS_PLUGIN_FAILED, "context deadline exceeded");
    /* What the error carries of the call, as fields: a runtime tests
     * these, not the message. */
    assert_int_equal(nri_adaptation_event(f->a, NRI_EVENT_RUN_POD_SANDBOX, NULL, req.data, req.len,
                                          NULL, &err),
                     NRI_STATUS_PLUGIN_FAILED);
    assert_int_equal(nri_error_cause(err), NRI_CAUSE_DEADLINE_EXCEEDED);
    assert_true(nri_error_is_call_error(err));
    assert_string_equal(nri_error_plugin(err), "10-slow");
    assert_int_equal(nri_error_code(err), -1);
    assert_string_equal(nri_error_cause_message(err), "");
    nri_error_free(err);
    err = NULL;
    /* NULL says nothing. */
    assert_int_equal(nri_error_cause(NULL), NRI_CAUSE_NONE);
    assert_false(nri_error_is_call_error(NULL));
    assert_string_equal(nri_error_plugin(NULL), "");
    pb_free(&req);
}

/* Two builtin plugins of 400 ms each against a 600 ms event budget: the
 * event fails at the budget, and neither plugin is dropped for it. */
static void slow_run_pod(void *ud, nri_builtin_op op, const uint8_t *req, size_t len,
                         nri_reply *reply)
{
    (void)ud, (void)req, (void)len, (void)reply;
    if (op == NRI_BUILTIN_OP_RUN_POD_SANDBOX)
        sleep_ms(400);
}

/* The plugin lifecycle options, activation within the sync and handover:
 * refused without options; with them, start and stop work as without
 * (their effect on plugins is tested in the core's and the Go tests). */
static void plugin_lifecycle_options_are_options(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    assert_fails(nri_options_set_activate_within_sync(NULL, true, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "options");
    assert_fails(nri_options_set_plugin_handover(NULL, true, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "options");
    assert_ok(nri_options_set_activate_within_sync(f->opts, true, &err), &err);
    assert_ok(nri_options_set_plugin_handover(f->opts, true, &err), &err);
    fixture_new(f);
    assert_ok(nri_adaptation_start(f->a, &err), &err);
    assert_ok(nri_adaptation_stop(f->a, &err), &err);
}

/* Pod concurrency and the plugins that take concurrent requests: refused
 * without options, without a name and with an empty one; set, the
 * adaptation runs (its effect on plugins is tested in the core's tests,
 * with upstream Go-stub plugin processes). */
static void pod_concurrency_is_an_option(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    assert_fails(nri_options_set_pod_concurrency(NULL, true, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "options");
    assert_fails(nri_options_add_concurrent_plugin(NULL, "10-fast", &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "options");
    assert_fails(nri_options_add_concurrent_plugin(f->opts, NULL, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "plugin is NULL");
    assert_fails(nri_options_add_concurrent_plugin(f->opts, "", &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "plugin is empty");
    assert_ok(nri_options_set_pod_concurrency(f->opts, true, &err), &err);
    assert_ok(nri_options_add_concurrent_plugin(f->opts, "10-fast", &err), &err);
    fixture_new(f);
    assert_ok(nri_adaptation_start(f->a, &err), &err);
    assert_ok(nri_adaptation_stop(f->a, &err), &err);
}

/* A plugin's own request timeout: refused without options, without a
 * name, with an empty one and at 0 ms; set, the adaptation runs. */
static void plugin_request_timeout_needs_a_name_and_a_time(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    assert_fails(nri_options_set_plugin_request_timeout(NULL, "10-slow", 5000, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "options");
    assert_fails(nri_options_set_plugin_request_timeout(f->opts, NULL, 5000, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "plugin is NULL");
    assert_fails(nri_options_set_plugin_request_timeout(f->opts, "", 5000, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "plugin is empty");
    assert_fails(nri_options_set_plugin_request_timeout(f->opts, "slow", 0, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "request timeout of plugin \"slow\" is 0");
    assert_fails(nri_options_set_plugin_request_timeout(f->opts, "slow", UINT64_MAX, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "out of range");
    assert_ok(nri_options_set_plugin_request_timeout(f->opts, "10-slow", 5000, &err), &err);
    fixture_new(f);
    assert_ok(nri_adaptation_start(f->a, &err), &err);
    assert_ok(nri_adaptation_stop(f->a, &err), &err);
}

/* Sync timeouts, the adaptation's and one plugin's: refused without
 * options, at 0 ms and past what the wire carries, and for a plugin
 * without a name; set, the adaptation runs. */
static void sync_timeouts_need_a_time_and_a_plugin_a_name(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    assert_fails(nri_options_set_sync_timeout(NULL, 5000, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "options");
    assert_fails(nri_options_set_sync_timeout(f->opts, 0, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "sync timeout is 0");
    assert_fails(nri_options_set_sync_timeout(f->opts, UINT64_MAX, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "sync timeout is out of range");
    assert_fails(nri_options_set_plugin_sync_timeout(NULL, "10-slow", 5000, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "options");
    assert_fails(nri_options_set_plugin_sync_timeout(f->opts, NULL, 5000, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "plugin is NULL");
    assert_fails(nri_options_set_plugin_sync_timeout(f->opts, "", 5000, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "plugin is empty");
    assert_fails(nri_options_set_plugin_sync_timeout(f->opts, "slow", 0, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "sync timeout of plugin \"slow\" is 0");
    assert_fails(nri_options_set_plugin_sync_timeout(f->opts, "slow", UINT64_MAX, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "out of range");
    assert_ok(nri_options_set_sync_timeout(f->opts, 30000, &err), &err);
    assert_ok(nri_options_set_plugin_sync_timeout(f->opts, "10-slow", 60000, &err), &err);
    fixture_new(f);
    assert_ok(nri_adaptation_start(f->a, &err), &err);
    assert_ok(nri_adaptation_stop(f->a, &err), &err);
}

/* Shutdown on stop: refused without options; with it, start and stop work
 * as without (its effect on plugins is tested in the core's Rust tests). */
static void shutdown_on_stop_is_an_option(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    assert_fails(nri_options_set_shutdown_on_stop(NULL, true, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "options");
    assert_ok(nri_options_set_shutdown_on_stop(f->opts, true, &err), &err);
    fixture_new(f);
    assert_ok(nri_adaptation_start(f->a, &err), &err);
    assert_ok(nri_adaptation_stop(f->a, &err), &err);
}

static void event_timeout_bounds_whole_events(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    nri_builtin_plugin a = { "slow-a", "10", 0, slow_run_pod, NULL, NULL };
    nri_builtin_plugin b = { "slow-b", "20", 0, slow_run_pod, NULL, NULL };
    assert_fails(nri_options_set_event_timeout(NULL, 1, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "options");
    assert_ok(nri_options_set_event_timeout(f->opts, 600, &err), &err);
    assert_ok(nri_options_add_builtin_plugin(f->opts, &a, &err), &err);
    assert_ok(nri_options_add_builtin_plugin(f->opts, &b, &err), &err);
    fixture_new(f);
    assert_ok(nri_adaptation_start(f->a, &err), &err);
    pb req = { 0 };
    msg_pod_request(&req, "pod0");
    for (int i = 0; i < 2; i++)
        assert_fails(nri_adaptation_run_pod_sandbox(f->a, req.data, req.len, &err), &err,
                     NRI_STATUS_PLUGIN_FAILED,
                     "RunPodSandbox exceeded the NRI event time budget of 600ms");
    pb_free(&req);
}

/* The runtime gives up on an event through an nri_cancel, from another
 * thread, while a builtin plugin still works on it: the call returns at
 * once with Go's text for the reason. */
typedef struct canceller {
    nri_cancel *cancel;
    int after_ms;
} canceller;

static void *cancel_later(void *arg)
{
    canceller *k = arg;
    sleep_ms(k->after_ms);
    nri_cancel_trigger(k->cancel, NRI_CANCEL_REASON_DEADLINE_EXCEEDED);
    return NULL;
}

static long elapsed_ms(const struct timespec *since)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (now.tv_sec - since->tv_sec) * 1000 + (now.tv_nsec - since->tv_nsec) / 1000000;
}

static void a_cancelled_event_returns_at_once(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    nri_builtin_plugin slow = { "slow", "10", 0, slow_handler, NULL, NULL };
    assert_ok(nri_options_add_builtin_plugin(f->opts, &slow, &err), &err);
    fixture_new(f);
    assert_ok(nri_adaptation_start(f->a, &err), &err);

    nri_cancel *cancel = NULL;
    assert_fails(nri_cancel_new(NULL, &err), &err, NRI_STATUS_INVALID_ARGUMENT, "out is NULL");
    assert_ok(nri_cancel_new(&cancel, &err), &err);
    canceller k = { cancel, 100 };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, cancel_later, &k), 0);
    pb req = { 0 };
    msg_pod_request(&req, "pod0");
    struct timespec started;
    clock_gettime(CLOCK_MONOTONIC, &started);
    assert_fails(nri_adaptation_event(f->a, 1 /* RunPodSandbox */, cancel, req.data, req.len,
                                      NULL, &err),
                 &err, NRI_STATUS_CANCELED, "context deadline exceeded");
    assert_true(elapsed_ms(&started) < 1000); /* the handler takes 1500 ms */
    assert_int_equal(pthread_join(t, NULL), 0);
    /* Later triggers change nothing; NULL is a no-op. */
    nri_cancel_trigger(cancel, NRI_CANCEL_REASON_CANCELED);
    nri_cancel_trigger(NULL, NRI_CANCEL_REASON_CANCELED);
    assert_fails(nri_adaptation_event(f->a, 1, cancel, req.data, req.len, NULL, &err), &err,
                 NRI_STATUS_CANCELED, "context deadline exceeded");
    nri_cancel_free(cancel);
    nri_cancel_free(NULL);
    pb_free(&req);

    /* Without a cancel, any event; one with a response writes it. */
    pb creq = { 0 };
    nri_buffer rsp = { 0 };
    msg_container_request(&creq, "pod0", "ctr0", "ctr0");
    assert_ok(nri_adaptation_event(f->a, 4 /* CreateContainer */, NULL, creq.data, creq.len,
                                   &rsp, &err),
              &err);
    nri_buffer_free(&rsp);
    assert_fails(nri_adaptation_event(f->a, 4, NULL, creq.data, creq.len, NULL, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "response is NULL");
    assert_fails(nri_adaptation_event(f->a, 99, NULL, creq.data, creq.len, &rsp, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "unknown event 99");
    assert_fails(nri_adaptation_event(NULL, 4, NULL, creq.data, creq.len, &rsp, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "adaptation is NULL");
    pb_free(&creq);
}

static int is_socket(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

static void socket_path_is_where_plugins_connect(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    char sock[512];
    fixture_external(f);
    tmp_join(sock, sizeof sock, &f->dir, "custom.sock");
    assert_ok(nri_options_set_socket_path(f->opts, sock, &err), &err);
    fixture_new(f);
    assert_false(is_socket(sock));
    assert_ok(nri_adaptation_start(f->a, &err), &err);
    assert_true(is_socket(sock));
    assert_ok(nri_adaptation_stop(f->a, &err), &err);
}

static void disabled_external_connections_create_no_socket(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    char sock[512];
    tmp_join(sock, sizeof sock, &f->dir, "custom.sock");
    /* A socket path does not undo the disabling. */
    assert_ok(nri_options_set_socket_path(f->opts, sock, &err), &err);
    assert_ok(nri_options_disable_external_connections(f->opts, &err), &err);
    assert_ok(start_with_recorder(f, &err), &err);
    assert_false(is_socket(sock));
}

static void plugin_path_is_scanned(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    char path[512];
    /* An executable not named NN-name fails discovery, as upstream. */
    tmp_join(path, sizeof path, &f->dir, "scanned");
    assert_int_equal(mkdir(path, 0755), 0);
    assert_ok(nri_options_set_plugin_path(f->opts, path, &err), &err);
    tmp_join(path, sizeof path, &f->dir, "scanned/no-index");
    write_file(path, "#!/bin/sh\nexit 0\n", 0755);
    fixture_new(f);
    assert_fails(nri_adaptation_start(f->a, &err), &err, NRI_STATUS_START_FAILED,
                 "failed to discover plugins");
}

static void plugin_config_path_feeds_configure(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    char path[512];
    /* Drop-ins are for pre-installed plugins, read when they are found:
     * an unreadable one (a directory) fails the start. */
    tmp_join(path, sizeof path, &f->dir, "plugins");
    assert_int_equal(mkdir(path, 0755), 0);
    tmp_join(path, sizeof path, &f->dir, "plugins/10-true");
    write_file(path, "#!/bin/sh\nexit 0\n", 0755);
    tmp_join(path, sizeof path, &f->dir, "dropins");
    assert_int_equal(mkdir(path, 0755), 0);
    assert_ok(nri_options_set_plugin_config_path(f->opts, path, &err), &err);
    tmp_join(path, sizeof path, &f->dir, "dropins/10-true.conf");
    assert_int_equal(mkdir(path, 0755), 0);
    fixture_new(f);
    assert_fails(nri_adaptation_start(f->a, &err), &err, NRI_STATUS_START_FAILED,
                 "10-true.conf");
}

static void default_validator_enforces_required_plugins(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    nri_buffer rsp = { 0 };
    assert_ok(nri_options_set_default_validator(f->opts,
                                                "enable: true\nrequiredPlugins: [must-have]\n",
                                                &err),
              &err);
    assert_ok(start_with_recorder(f, &err), &err);
    pb req = { 0 };
    msg_container_request(&req, "pod0", "ctr0", "ctr0");
    assert_fails(nri_adaptation_create_container(f->a, req.data, req.len, &rsp, &err), &err,
                 NRI_STATUS_REJECTED, "must-have");
    assert_null(rsp.data);
    pb_free(&req);
}

/* With required plugins guarding pods, a pod is refused too while a
 * required plugin is absent; without, as upstream, it goes through. */
static void required_plugins_guard_pods_when_asked(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    assert_fails(nri_options_set_required_plugins_guard_pods(NULL, true, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "options");
    assert_ok(nri_options_set_default_validator(f->opts,
                                                "enable: true\nrequiredPlugins: [must-have]\n",
                                                &err),
              &err);
    assert_ok(nri_options_set_required_plugins_guard_pods(f->opts, true, &err), &err);
    assert_ok(start_with_recorder(f, &err), &err);
    pb req = { 0 };
    msg_pod_request(&req, "pod0");
    assert_fails(nri_adaptation_run_pod_sandbox(f->a, req.data, req.len, &err), &err,
                 NRI_STATUS_REJECTED,
                 "validator \"00-default-validator\" rejected pod sandbox, reason: "
                 "validation error: required plugin \"must-have\" not present");
    pb_free(&req);
}

static void default_validator_needs_enable(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    nri_buffer rsp = { 0 };
    /* JSON works too; without enable the validator stays off. An empty
     * configuration is the default one (off). */
    assert_ok(nri_options_set_default_validator(f->opts, "", &err), &err);
    assert_ok(nri_options_set_default_validator(f->opts, "{\"requiredPlugins\": [\"x\"]}", &err),
              &err);
    assert_fails(nri_options_set_default_validator(f->opts, "enable: [", &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "invalid default validator config");
    assert_ok(start_with_recorder(f, &err), &err);
    pb req = { 0 };
    msg_container_request(&req, "pod0", "ctr0", "ctr0");
    assert_ok(nri_adaptation_create_container(f->a, req.data, req.len, &rsp, &err), &err);
    nri_buffer_free(&rsp);
    pb_free(&req);
}

/* An identity policy: refused without options or policy, or with a key it
 * does not know; with one, only the plugin it admits (this process's uid,
 * by name) registers, and the other is refused before any sync. */
static void plugin_identities_admit_only_what_the_policy_names(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    char policy[128], sock[512];
    assert_fails(nri_options_set_plugin_identities(NULL, "rules: []", &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "options");
    assert_fails(nri_options_set_plugin_identities(f->opts, NULL, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "policy");
    assert_fails(nri_options_set_plugin_identities(f->opts, "rules: [{plugins: [a], uid: [0]}]",
                                                   &err),
                 &err, NRI_STATUS_INVALID_ARGUMENT, "uid");

    snprintf(policy, sizeof policy, "{\"rules\": [{\"plugins\": [\"admitted\"], \"uids\": [%u]}]}",
             (unsigned)getuid());
    fixture_external(f);
    assert_ok(nri_options_set_plugin_identities(f->opts, policy, &err), &err);
    fixture_start(f);
    tmp_join(sock, sizeof sock, &f->dir, "nri.sock");
    wire_plugin *barred = fixture_keep(f, sizeof *barred, wire_plugin_release);
    wire_plugin *admitted = fixture_keep(f, sizeof *admitted, wire_plugin_release);
    barred->name = "barred";
    barred->idx = "10";
    admitted->name = "admitted";
    admitted->idx = "20";
    assert_int_equal(wire_plugin_start(barred, sock), 0);
    assert_int_equal(wire_plugin_start(admitted, sock), 0);
    /* The start's sync, then the admitted plugin's. */
    assert_true(runtime_wait(&f->rt, &f->rt.syncs, 2, WAIT_MS));
    assert_false(runtime_wait(&f->rt, &f->rt.syncs, 3, 200));
    assert_int_equal(atomic_load(&admitted->registered), 1);
    assert_int_equal(atomic_load(&barred->registered), 0);

    /* Who the admitted plugin is: this process. (It is active once the
     * sync callback has returned, a moment after it counted the sync.) */
    for (int i = 0; i < WAIT_MS / 10 && !nri_adaptation_has_plugin(f->a, "20-admitted"); i++)
        sleep_ms(10);
    nri_buffer id = { 0 };
    char want[64];
    assert_fails(nri_adaptation_plugin_identity(f->a, NULL, &id, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "name");
    assert_fails(nri_adaptation_plugin_identity(f->a, "20-admitted", NULL, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "identity");
    assert_ok(nri_adaptation_plugin_identity(f->a, "20-admitted", &id, &err), &err);
    char *json = strndup((const char *)id.data, id.len);
    snprintf(want, sizeof want, "{\"uid\":%u,\"gid\":%u,\"pid\":%d,", (unsigned)getuid(),
             (unsigned)getgid(), (int)getpid());
    if (strncmp(json, want, strlen(want)) != 0)
        fprintf(stderr, "identity %s, want it to start with %s\n", json, want);
    assert_true(strncmp(json, want, strlen(want)) == 0);
    free(json);
    nri_buffer_free(&id);
    assert_ok(nri_adaptation_plugin_identity(f->a, "10-barred", &id, &err), &err);
    assert_int_equal(id.len, 0);
    nri_buffer_free(&id);
    nri_adaptation_free(f->a);
    f->a = NULL;
    wire_plugin_stop(barred);
    wire_plugin_stop(admitted);
}


int main(void)
{
    harness_init();
    const struct CMUnitTest tests[] = {
        FIXTURE_TEST(configure_carries_runtime_and_nri_version),
        FIXTURE_TEST(nri_version_defaults_to_the_api_version),
        FIXTURE_TEST(per_adaptation_timeouts_win),
        FIXTURE_TEST(zero_keeps_the_process_wide_timeouts),
        FIXTURE_TEST(request_timeout_fails_slow_plugins),
        FIXTURE_TEST(event_timeout_bounds_whole_events),
        FIXTURE_TEST(shutdown_on_stop_is_an_option),
        FIXTURE_TEST(plugin_lifecycle_options_are_options),
        FIXTURE_TEST(pod_concurrency_is_an_option),
        FIXTURE_TEST(plugin_request_timeout_needs_a_name_and_a_time),
        FIXTURE_TEST(sync_timeouts_need_a_time_and_a_plugin_a_name),
        FIXTURE_TEST(a_cancelled_event_returns_at_once),
        FIXTURE_TEST(socket_path_is_where_plugins_connect),
        FIXTURE_TEST(disabled_external_connections_create_no_socket),
        FIXTURE_TEST(plugin_path_is_scanned),
        FIXTURE_TEST(plugin_config_path_feeds_configure),
        FIXTURE_TEST(default_validator_enforces_required_plugins),
        FIXTURE_TEST(required_plugins_guard_pods_when_asked),
        FIXTURE_TEST(default_validator_needs_enable),
        FIXTURE_TEST(plugin_identities_admit_only_what_the_policy_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
