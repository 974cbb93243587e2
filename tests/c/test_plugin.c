/* Real Rust plugins, as separate processes over a real socket, adjusting
 * containers created from C: the sample plugin nri-logger pre-installed
 * (launched by the library with its drop-in configuration), and
 * nri-interop-plugin (tests/tools) connecting to the socket on its own. */
#include "harness.h"

#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#define WAIT_MS 60000

extern char **environ;

/* CreateContainer from C; the adjustment of the response, copied. */
static nri_status create(fixture *f, const char *ctr, pb *adjust, nri_error **err)
{
    pb req = { 0 };
    nri_buffer rsp = { 0 };
    const uint8_t *adj;
    size_t len;
    static const uint32_t path[] = { F_CREATE_RSP_ADJUST };
    msg_container_request(&req, "pod0", ctr, ctr);
    nri_status st = nri_adaptation_create_container(f->a, req.data, req.len, &rsp, err);
    pb_free(&req);
    pb_free(adjust);
    if (st == NRI_STATUS_OK && pb_path(rsp.data, rsp.len, path, 1, &adj, &len))
        pb_raw(adjust, adj, len);
    nri_buffer_free(&rsp);
    return st;
}

static void sample_logger_plugin_adjusts_a_container(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    char config[1024], log[512], value[128];
    pb adjust = { 0 };
    /* upstream logger's configuration keys, as its drop-in. */
    tmp_join(log, sizeof log, &f->dir, "logger.log");
    snprintf(config, sizeof config,
             "logFile: %s\nsetEnv: NRI_LOGGER\naddAnnotation: logger.nri.io/seen\n", log);
    install_plugin(&f->dir, "nri-logger", "10-logger", config);
    /* Start launches it, configures and synchronizes it before returning. */
    fixture_start(f);
    assert_int_equal(f->rt.syncs, 1);

    assert_ok(create(f, "ctr-logged", &adjust, &err), &err);
    assert_true(msg_adjust_env(adjust.data, adjust.len, "NRI_LOGGER", value, sizeof value));
    assert_int_equal(strncmp(value, "logger-pid-", 11), 0);
    assert_true(msg_adjust_annotation(adjust.data, adjust.len, "logger.nri.io/seen", value,
                                      sizeof value));
    assert_int_equal(strncmp(value, "logger-pid-", 11), 0);
    pb_free(&adjust);
    /* It logged what it saw: the container made in C. */
    assert_true(wait_for_text(log, "ctr-logged", WAIT_MS));

    /* Stop closes the connection; the plugin exits and events go nowhere. */
    assert_ok(nri_adaptation_stop(f->a, &err), &err);
    assert_fails(create(f, "late", &adjust, &err), &err, NRI_STATUS_NOT_RUNNING, NULL);
}

/* Starts nri-interop-plugin connecting to the fixture's socket. */
static void spawn_interop(fixture *f, const char *name)
{
    char bin[512], sock[512], config[1024], record[512];
    bin_path(bin, sizeof bin, "nri-interop-plugin");
    tmp_join(sock, sizeof sock, &f->dir, "nri.sock");
    tmp_join(record, sizeof record, &f->dir, "interop.jsonl");
    snprintf(config, sizeof config, "{\"adjust\": true, \"record\": \"%s\"}", record);
    char *argv[] = { bin, "--socket", sock, "--name", (char *)name, "--idx", "20",
                     "--config", config, NULL };
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, bin, NULL, NULL, argv, environ), 0);
    f->child = pid;
}

/* Creates containers until one comes back adjusted by the interop plugin
 * (it is active only once its synchronization has returned). */
static int adjusted_by_interop(fixture *f, const char *name)
{
    char key[64], value[128], ctr[32];
    pb adjust = { 0 };
    nri_error *err = NULL;
    snprintf(key, sizeof key, "NRI_RS_PLUGIN_%s", name);
    for (int i = 0; i < WAIT_MS / 50; i++) {
        snprintf(ctr, sizeof ctr, "ctr-%d", i);
        assert_ok(create(f, ctr, &adjust, &err), &err);
        int found = msg_adjust_env(adjust.data, adjust.len, key, value, sizeof value);
        pb_free(&adjust);
        if (found) {
            assert_string_equal(value, name);
            return 1;
        }
        sleep_ms(50);
    }
    return 0;
}

static void external_plugin_syncs_when_unblocked(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    fixture_external(f);
    fixture_start(f);
    assert_int_equal(f->rt.syncs, 1);

    /* Held off: the plugin connects and registers, but is not synchronized
     * (and so gets no events) until the block is freed. */
    nri_plugin_sync_block *block = NULL;
    assert_ok(nri_adaptation_block_plugin_sync(f->a, &block, &err), &err);
    spawn_interop(f, "ext");
    assert_false(runtime_wait(&f->rt, &f->rt.syncs, 2, 1000));
    nri_plugin_sync_block_free(block);

    /* Synchronized through the sync callback, on a library thread. */
    assert_true(runtime_wait(&f->rt, &f->rt.syncs, 2, WAIT_MS));
    assert_int_equal(f->rt.off_main, 2);
    assert_true(adjusted_by_interop(f, "ext"));
}

static void sync_callback_errors_reject_the_plugin(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    pb adjust = { 0 };
    int status;
    fixture_external(f);
    fixture_start(f);
    f->rt.sync_error = "no more plugins today";
    spawn_interop(f, "refused");
    assert_true(runtime_wait(&f->rt, &f->rt.syncs, 2, WAIT_MS));
    /* Rejected: the connection is closed and the plugin exits with an
     * error; no container is ever adjusted by it. */
    assert_int_equal(waitpid((pid_t)f->child, &status, 0), f->child);
    f->child = 0;
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) != 0);
    char value[64];
    assert_ok(create(f, "ctr", &adjust, &err), &err);
    int adjusted = msg_adjust_env(adjust.data, adjust.len, "NRI_RS_PLUGIN_refused", value,
                                  sizeof value);
    pb_free(&adjust);
    assert_false(adjusted);
}


int main(void)
{
    harness_init();
    const struct CMUnitTest tests[] = {
        FIXTURE_TEST(sample_logger_plugin_adjusts_a_container),
        FIXTURE_TEST(external_plugin_syncs_when_unblocked),
        FIXTURE_TEST(sync_callback_errors_reject_the_plugin),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
