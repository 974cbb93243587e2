/* A WASM engine lent by the caller (nri_options_set_wasm_engine): the WASM
 * plugins the compiled-module cache does not hold run on it, their calls'
 * statuses are honoured, modules are released and the engine's user data
 * freed once, and unusable engines are refused; with WASM disabled, or
 * with no engine lent to a library that compiles none, no module is
 * loaded. */
#include "harness.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

typedef struct lent {
    pthread_mutex_t lock;
    int loads, calls, releases, freed;
    char name[64];
    size_t len;
    uint64_t memory_limit, init_timeout_ns;
    /* What CreateContainer returns: a status, possibly not a valid one. */
    uint32_t create_status;
    int module; /* the handle given out is its address */
} lent;

static void lent_load(void *ud, const char *name, const uint8_t *wasm, size_t len,
                      uint64_t memory_limit, uint64_t init_timeout_ns, void **module,
                      nri_reply *reply)
{
    lent *l = ud;
    (void)reply;
    TH_CHECK(len >= 4 && memcmp(wasm, "\0asm", 4) == 0);
    pthread_mutex_lock(&l->lock);
    l->loads++;
    snprintf(l->name, sizeof l->name, "%s", name);
    l->len = len;
    l->memory_limit = memory_limit;
    l->init_timeout_ns = init_timeout_ns;
    pthread_mutex_unlock(&l->lock);
    *module = &l->module;
}

static uint32_t lent_call(void *ud, void *module, const char *method, const uint8_t *req,
                          size_t len, uint64_t timeout_ns, nri_reply *reply)
{
    lent *l = ud;
    (void)req;
    (void)len;
    TH_CHECK(module == &l->module);
    TH_CHECK(timeout_ns > 0);
    pthread_mutex_lock(&l->lock);
    l->calls++;
    uint32_t status = l->create_status;
    pthread_mutex_unlock(&l->lock);
    if (strcmp(method, "CreateContainer") != 0) {
        return NRI_WASM_STATUS_OK; /* no data: an empty reply */
    }
    if (status != NRI_WASM_STATUS_OK) {
        nri_reply_set_error(reply, "the lent module says no");
        return status;
    }
    pb rsp = { 0 };
    msg_create_response_env(&rsp, "LENT", "yes");
    nri_reply_set_data(reply, rsp.data, rsp.len);
    pb_free(&rsp);
    return NRI_WASM_STATUS_OK;
}

static void lent_release(void *ud, void *module)
{
    lent *l = ud;
    TH_CHECK(module == &l->module);
    pthread_mutex_lock(&l->lock);
    l->releases++;
    pthread_mutex_unlock(&l->lock);
}

static void lent_free(void *ud)
{
    lent *l = ud;
    pthread_mutex_lock(&l->lock);
    l->freed++;
    pthread_mutex_unlock(&l->lock);
}

static void lent_destroy(void *p)
{
    pthread_mutex_destroy(&((lent *)p)->lock);
}

static lent *lent_new(fixture *f, uint32_t create_status)
{
    lent *l = fixture_keep(f, sizeof *l, lent_destroy);
    pthread_mutex_init(&l->lock, NULL);
    l->create_status = create_status;
    return l;
}

static nri_wasm_engine lent_engine(lent *l)
{
    nri_wasm_engine e = {
        .load = lent_load,
        .call = lent_call,
        .release = lent_release,
        .user_data = l,
        .free_user_data = lent_free,
    };
    return e;
}

/* The smallest WASM module: its magic and version. The lent engine is the
 * one to judge the rest. */
static void install_module(fixture *f, const char *file)
{
    char path[512];
    tmp_join(path, sizeof path, &f->dir, "plugins");
    assert_int_equal(mkdir(path, 0755) == 0 || errno == EEXIST, 1);
    tmp_join(path, sizeof path, &f->dir, "plugins/");
    strncat(path, file, sizeof path - strlen(path) - 1);
    FILE *out = fopen(path, "wb");
    assert_non_null(out);
    assert_int_equal(fwrite("\0asm\1\0\0\0", 1, 8, out), 8);
    assert_int_equal(fclose(out), 0);
    assert_int_equal(chmod(path, 0755), 0);
}

static void lend(fixture *f, lent *l)
{
    nri_error *err = NULL;
    nri_wasm_engine e = lent_engine(l);
    /* No cache: nothing is taken compiled, nothing is compiled. */
    assert_ok(nri_options_set_wasm_cache_dir(f->opts, "", &err), &err);
    assert_ok(nri_options_set_wasm_engine(f->opts, &e, &err), &err);
}

static nri_status create(fixture *f, nri_buffer *rsp, nri_error **err)
{
    pb req = { 0 };
    msg_container_request(&req, "pod0", "ctr0", "ctr0");
    nri_status st = nri_adaptation_create_container(f->a, req.data, req.len, rsp, err);
    pb_free(&req);
    return st;
}

static void a_module_the_cache_lacks_runs_on_the_lent_engine(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    nri_buffer rsp = { 0 };
    char value[16];
    const uint8_t *adj;
    size_t adj_len;
    lent *l = lent_new(f, NRI_WASM_STATUS_OK);
    install_module(f, "10-lent");
    lend(f, l);
    fixture_start(f);
    assert_true(nri_adaptation_has_plugin(f->a, "10-lent"));
    assert_int_equal(l->loads, 1);
    assert_string_equal(l->name, "10-lent");
    assert_int_equal(l->len, 8);
    assert_true(l->memory_limit > 0);
    assert_true(l->init_timeout_ns > 0);

    assert_ok(create(f, &rsp, &err), &err);
    static const uint32_t adjust[] = { F_CREATE_RSP_ADJUST };
    assert_true(pb_path(rsp.data, rsp.len, adjust, 1, &adj, &adj_len));
    assert_true(msg_adjust_env(adj, adj_len, "LENT", value, sizeof value));
    assert_string_equal(value, "yes");
    nri_buffer_free(&rsp);

    /* The module is released, and then the engine's user data freed. */
    nri_adaptation_free(f->a);
    f->a = NULL;
    assert_int_equal(l->releases, 1);
    assert_int_equal(l->freed, 1);
}

static void a_refusal_fails_the_request_and_keeps_the_plugin(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    nri_buffer rsp = { 0 };
    lent *l = lent_new(f, NRI_WASM_STATUS_REFUSED);
    install_module(f, "10-lent");
    lend(f, l);
    fixture_start(f);
    assert_fails(create(f, &rsp, &err), &err, NRI_STATUS_PLUGIN_FAILED, "the lent module says no");
    assert_true(nri_adaptation_has_plugin(f->a, "10-lent"));
}

/* A dead module, and a status that is none of nri_wasm_status (taken as
 * dead): the request fails, the plugin is dropped and its module released. */
static void a_dead_module_fails_the_request_and_is_dropped(void **state)
{
    fixture *f = *state;
    uint32_t statuses[] = { NRI_WASM_STATUS_DEAD, 77 };
    for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++) {
        nri_error *err = NULL;
        nri_buffer rsp = { 0 };
        if (i > 0) {
            nri_adaptation_free(f->a);
            f->a = NULL;
            f->opts = test_options(&f->dir, 0);
        }
        lent *l = lent_new(f, statuses[i]);
        install_module(f, "10-lent");
        lend(f, l);
        fixture_start(f);
        assert_fails(create(f, &rsp, &err), &err, NRI_STATUS_PLUGIN_FAILED,
                     "the lent module says no");
        assert_false(nri_adaptation_has_plugin(f->a, "10-lent"));
        assert_int_equal(l->releases, 1);
    }
}

static void unusable_engines_are_refused_and_finalized(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    lent *l = lent_new(f, NRI_WASM_STATUS_OK);
    int freed = 0;
    nri_wasm_engine e = lent_engine(l);

    e.load = NULL;
    assert_fails(nri_options_set_wasm_engine(f->opts, &e, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "WASM engine without load");
    /* The user data is owned from the call on, even when it fails. */
    assert_int_equal(l->freed, ++freed);
    e = lent_engine(l);
    e.call = NULL;
    assert_fails(nri_options_set_wasm_engine(f->opts, &e, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "WASM engine without call");
    assert_int_equal(l->freed, ++freed);
    e = lent_engine(l);
    e.release = NULL;
    assert_fails(nri_options_set_wasm_engine(f->opts, &e, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "WASM engine without release");
    assert_int_equal(l->freed, ++freed);
    e = lent_engine(l);
    assert_fails(nri_options_set_wasm_engine(NULL, &e, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "options is NULL");
    assert_int_equal(l->freed, ++freed);
    assert_fails(nri_options_set_wasm_engine(f->opts, NULL, &err), &err,
                 NRI_STATUS_INVALID_ARGUMENT, "engine is NULL");
    assert_int_equal(l->loads, 0);
}

/* nri_options_disable_wasm, what go/adaptation built with nri_no_wasm
 * sets: the module is not loaded, not even on a lent engine. */
static void with_wasm_disabled_no_module_is_loaded(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    lent *l = lent_new(f, NRI_WASM_STATUS_OK);
    install_module(f, "10-lent");
    lend(f, l);
    assert_fails(nri_options_disable_wasm(NULL, &err), &err, NRI_STATUS_INVALID_ARGUMENT,
                 "options is NULL");
    assert_ok(nri_options_disable_wasm(f->opts, &err), &err);
    fixture_start(f);
    assert_false(nri_adaptation_has_plugin(f->a, "10-lent"));
    assert_int_equal(l->loads, 0);
}

/* A library built without compiled-wasm, lent no engine, has nothing to
 * run a module on: it is refused, as by upstream built with nri_no_wasm.
 * (With the feature, this 8-byte module is refused for lacking the
 * plugin interface: not loaded either.) */
static void without_an_engine_or_compiled_wasm_no_module_is_loaded(void **state)
{
    fixture *f = *state;
    nri_error *err = NULL;
    install_module(f, "10-none");
    assert_ok(nri_options_set_wasm_cache_dir(f->opts, "", &err), &err);
    fixture_start(f);
    assert_false(nri_adaptation_has_plugin(f->a, "10-none"));
}

int main(void)
{
    harness_init();
    const struct CMUnitTest tests[] = {
        FIXTURE_TEST(a_module_the_cache_lacks_runs_on_the_lent_engine),
        FIXTURE_TEST(a_refusal_fails_the_request_and_keeps_the_plugin),
        FIXTURE_TEST(a_dead_module_fails_the_request_and_is_dropped),
        FIXTURE_TEST(unusable_engines_are_refused_and_finalized),
        FIXTURE_TEST(with_wasm_disabled_no_module_is_loaded),
        FIXTURE_TEST(without_an_engine_or_compiled_wasm_no_module_is_loaded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
