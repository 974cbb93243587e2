/* nri_set_log_callback: the library's log records reach a C callback,
 * from any thread, filtered by level; NULL or OFF turns logging off.
 * The callback is process-wide, so this program tests nothing else. */
#include "harness.h"

#include <stdio.h>
#include <string.h>

#define MAGIC 0x4c4f4721u
#define MAX_RECORDS 256

typedef struct logs {
    uint32_t magic;
    pthread_mutex_t lock;
    int n, off_main;
    nri_log_level max_seen;
    nri_log_level levels[MAX_RECORDS];
    char messages[MAX_RECORDS][160];
    char targets[MAX_RECORDS][64];
} logs;

static logs seen = { .magic = MAGIC, .lock = PTHREAD_MUTEX_INITIALIZER };

static void on_log(void *ud, nri_log_level level, const char *target, const char *message)
{
    logs *l = ud;
    TH_CHECK(l == &seen && l->magic == MAGIC);
    TH_CHECK(target != NULL && message != NULL);
    TH_CHECK(level >= NRI_LOG_LEVEL_ERROR && level <= NRI_LOG_LEVEL_TRACE);
    pthread_mutex_lock(&l->lock);
    if (l->n < MAX_RECORDS) {
        l->levels[l->n] = level;
        snprintf(l->messages[l->n], sizeof l->messages[0], "%s", message);
        snprintf(l->targets[l->n], sizeof l->targets[0], "%s", target);
        l->n++;
    }
    if (level > l->max_seen)
        l->max_seen = level;
    l->off_main += !th_on_main();
    pthread_mutex_unlock(&l->lock);
}

static void reset(void)
{
    pthread_mutex_lock(&seen.lock);
    seen.n = seen.off_main = 0;
    seen.max_seen = NRI_LOG_LEVEL_OFF;
    pthread_mutex_unlock(&seen.lock);
}

/* The index of the first record whose message contains `text`, or -1. */
static int find(const char *text)
{
    for (int i = 0; i < seen.n; i++)
        if (strstr(seen.messages[i], text))
            return i;
    return -1;
}

/* Brings an adaptation with a builtin plugin up and down; with
 * `failing_sync`, the plugin fails its Synchronize (logged as a warning). */
static void run_adaptation(int failing_sync)
{
    void *state;
    fixture_setup(&state);
    fixture *f = state;
    if (failing_sync) {
        f->rec.fail_op = NRI_BUILTIN_OP_SYNCHRONIZE;
        f->rec.fail_message = "no sync for you";
    }
    fixture_add(f, &f->rec, "logged", "10", 0);
    fixture_start(f);
    fixture_teardown(&state);
}

static void records_reach_the_callback(void **state)
{
    (void)state;
    nri_error *err = NULL;
    reset();
    assert_ok(nri_set_log_callback(on_log, &seen, NRI_LOG_LEVEL_TRACE, &err), &err);
    run_adaptation(0);
    assert_ok(nri_set_log_callback(NULL, NULL, NRI_LOG_LEVEL_OFF, &err), &err);

    int created = find("runtime interface created");
    assert_true(created >= 0);
    assert_int_equal(seen.levels[created], NRI_LOG_LEVEL_INFO);
    assert_non_null(strstr(seen.targets[created], "nri"));
    /* Logged on the adaptation's thread. */
    assert_true(find("plugin builtin:10-logged started") >= 0);
    assert_true(seen.off_main > 0);
}

static void records_above_max_level_are_dropped(void **state)
{
    (void)state;
    nri_error *err = NULL;
    reset();
    assert_ok(nri_set_log_callback(on_log, &seen, NRI_LOG_LEVEL_WARN, &err), &err);
    run_adaptation(1);
    assert_ok(nri_set_log_callback(NULL, NULL, NRI_LOG_LEVEL_OFF, &err), &err);

    int warned = find("no sync for you");
    assert_true(warned >= 0);
    assert_int_equal(seen.levels[warned], NRI_LOG_LEVEL_WARN);
    assert_true(seen.max_seen <= NRI_LOG_LEVEL_WARN);
    assert_int_equal(find("runtime interface created"), -1);
}

static void null_callback_and_off_turn_logging_off(void **state)
{
    (void)state;
    nri_error *err = NULL;
    reset();
    assert_ok(nri_set_log_callback(on_log, &seen, NRI_LOG_LEVEL_OFF, &err), &err);
    run_adaptation(1);
    assert_int_equal(seen.n, 0);
    assert_ok(nri_set_log_callback(NULL, &seen, NRI_LOG_LEVEL_TRACE, &err), &err);
    run_adaptation(1);
    assert_int_equal(seen.n, 0);
    /* And back on: the callback replaces the previous one. */
    assert_ok(nri_set_log_callback(on_log, &seen, NRI_LOG_LEVEL_INFO, NULL), &err);
    run_adaptation(0);
    assert_true(seen.n > 0);
    assert_true(seen.max_seen <= NRI_LOG_LEVEL_INFO);
    assert_ok(nri_set_log_callback(NULL, NULL, NRI_LOG_LEVEL_OFF, &err), &err);
}

static void unknown_levels_are_refused(void **state)
{
    (void)state;
    nri_error *err = NULL;
    assert_fails(nri_set_log_callback(on_log, &seen, NRI_LOG_LEVEL_TRACE + 1, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "unknown log level 6");
    assert_fails(nri_set_log_callback(on_log, &seen, UINT32_MAX, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "unknown log level");
    /* The refused calls left logging as it was: off. */
    reset();
    run_adaptation(0);
    assert_int_equal(seen.n, 0);
    /* "another logger is installed" (INVALID_ARGUMENT) needs a second Rust
     * logger in the process, which a C program linking only libnri cannot
     * have. */
}

int main(void)
{
    harness_init();
    const struct CMUnitTest tests[] = {
        TEST(records_reach_the_callback),
        TEST(records_above_max_level_are_dropped),
        TEST(null_callback_and_off_turn_logging_off),
        TEST(unknown_levels_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
