#include "harness.h"

#include <errno.h>
#include <ftw.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- Checks on callback threads --------------------------------------- */

#define MAX_THREAD_FAILURES 16

static pthread_mutex_t th_lock = PTHREAD_MUTEX_INITIALIZER;
static char th_failures[MAX_THREAD_FAILURES][256];
static int th_count;
static pthread_t th_main;

void harness_init(void)
{
    th_main = pthread_self();
}

int th_on_main(void)
{
    return pthread_equal(pthread_self(), th_main);
}

void th_fail(const char *file, int line, const char *what)
{
    pthread_mutex_lock(&th_lock);
    if (th_count < MAX_THREAD_FAILURES)
        snprintf(th_failures[th_count], sizeof th_failures[0], "%s:%d: %s", file, line, what);
    th_count++;
    pthread_mutex_unlock(&th_lock);
}

void th_assert_clean(void)
{
    pthread_mutex_lock(&th_lock);
    int n = th_count;
    for (int i = 0; i < n && i < MAX_THREAD_FAILURES; i++)
        print_error("callback thread check failed: %s\n", th_failures[i]);
    th_count = 0;
    pthread_mutex_unlock(&th_lock);
    if (n > 0)
        fail_msg("%d check(s) failed on callback threads", n);
}

int th_teardown(void **state)
{
    (void)state;
    th_assert_clean();
    return 0;
}

/* ---- Statuses and errors ---------------------------------------------- */

void assert_ok_(nri_status st, nri_error **err, const char *call, const char *file, int line)
{
    if (st == NRI_STATUS_OK && *err == NULL)
        return;
    print_error("%s:%d: %s: status %u (%s): %s\n", file, line, call, (unsigned)st,
                nri_status_name(st), nri_error_message(*err));
    nri_error_free(*err);
    *err = NULL;
    _fail(file, line);
}

void assert_fails_(nri_status st, nri_error **err, nri_status want, const char *text,
                   const char *call, const char *file, int line)
{
    nri_error *e = *err;
    *err = NULL;
    const char *msg = nri_error_message(e);
    int ok = st == want && e != NULL && nri_error_status(e) == want
             && (text == NULL || strstr(msg, text) != NULL);
    if (!ok)
        print_error("%s:%d: %s: got status %u (%s) with error %s \"%s\", want status %u (%s) "
                    "and a message containing \"%s\"\n",
                    file, line, call, (unsigned)st, nri_status_name(st), e ? "object" : "NULL",
                    msg, (unsigned)want, nri_status_name(want), text ? text : "");
    nri_error_free(e);
    if (!ok)
        _fail(file, line);
}

/* ---- Temp dirs --------------------------------------------------------- */

void tmp_make(tmpdir *d)
{
    snprintf(d->path, sizeof d->path, "/tmp/nri-c-XXXXXX");
    assert_non_null(mkdtemp(d->path));
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

void tmp_remove(tmpdir *d)
{
    if (d->path[0])
        nftw(d->path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    d->path[0] = '\0';
}

void tmp_join(char *out, size_t cap, const tmpdir *d, const char *name)
{
    int n = snprintf(out, cap, "%s/%s", d->path, name);
    assert_true(n > 0 && (size_t)n < cap);
}

void write_file(const char *path, const char *content, unsigned mode)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(content, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(chmod(path, (mode_t)mode), 0);
}

char *read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len - 1 == 0) {
            char *more = realloc(buf, cap *= 2);
            if (!more)
                free(buf);
            buf = more;
        }
    }
    fclose(f);
    if (buf)
        buf[len] = '\0';
    return buf;
}

/* ---- Real plugins ----------------------------------------------------- */

#ifndef NRI_BIN_DIR
#error "build with -DNRI_BIN_DIR=\"/path/to/target/debug\""
#endif

void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

void bin_path(char *out, size_t cap, const char *binary)
{
    int n = snprintf(out, cap, "%s/%s", NRI_BIN_DIR, binary);
    assert_true(n > 0 && (size_t)n < cap);
    if (access(out, X_OK) != 0)
        fail_msg("%s is missing: build it with `make build`", out);
}

void install_plugin(const tmpdir *d, const char *binary, const char *name, const char *config)
{
    char dir[512], target[512], link[1024];
    tmp_join(dir, sizeof dir, d, "plugins");
    assert_true(mkdir(dir, 0755) == 0 || errno == EEXIST);
    tmp_join(dir, sizeof dir, d, "conf");
    assert_true(mkdir(dir, 0755) == 0 || errno == EEXIST);
    bin_path(target, sizeof target, binary);
    snprintf(link, sizeof link, "%s/plugins/%s", d->path, name);
    assert_int_equal(symlink(target, link), 0);
    if (config) {
        snprintf(link, sizeof link, "%s/conf/%s.conf", d->path, name);
        write_file(link, config, 0644);
    }
}

int wait_for_text(const char *path, const char *text, int timeout_ms)
{
    for (int waited = 0;; waited += 20) {
        char *content = read_file(path);
        int found = content && strstr(content, text);
        free(content);
        if (found)
            return 1;
        if (waited >= timeout_ms)
            return 0;
        sleep_ms(20);
    }
}

/* ---- The runtime's callbacks ------------------------------------------ */

static void runtime_sync(void *user_data, nri_sync_cb *cb, nri_reply *reply)
{
    runtime *rt = user_data;
    TH_CHECK(rt != NULL && rt->magic == RUNTIME_MAGIC);
    TH_CHECK(cb != NULL && reply != NULL);

    pb state = { 0 };
    static const uint8_t garbage[] = { 0xff, 0xff, 0xff, 0xff };
    const uint8_t *bytes = garbage;
    size_t len = sizeof garbage;
    if (!rt->sync_garbage) {
        msg_sync_state(&state, "pod0", "ctr0");
        bytes = state.data;
        len = state.len;
    }
    nri_buffer updates = { 0 };
    nri_error *err = NULL;
    nri_status st = nri_sync_cb_call(cb, bytes, len, &updates, &err);
    pb_free(&state);
    TH_CHECK(st == NRI_STATUS_OK ? err == NULL : err != NULL);
    TH_CHECK(st == NRI_STATUS_OK || updates.data == NULL);

    pthread_mutex_lock(&rt->lock);
    rt->syncs++;
    rt->off_main += !th_on_main();
    rt->sync_status = st;
    snprintf(rt->sync_message, sizeof rt->sync_message, "%s", nri_error_message(err));
    rt->sync_updates = pb_count(updates.data, updates.len, F_SYNC_RSP_UPDATE);
    pthread_cond_broadcast(&rt->cond);
    pthread_mutex_unlock(&rt->lock);

    if (rt->sync_error)
        TH_CHECK(nri_reply_set_error(reply, rt->sync_error) == NRI_STATUS_OK);
    else if (st != NRI_STATUS_OK)
        TH_CHECK(nri_reply_set_error(reply, nri_error_message(err)) == NRI_STATUS_OK);
    nri_error_free(err);
    nri_buffer_free(&updates);
}

static void runtime_update(void *user_data, const uint8_t *req, size_t len, nri_reply *reply)
{
    runtime *rt = user_data;
    TH_CHECK(rt != NULL && rt->magic == RUNTIME_MAGIC);
    TH_CHECK(reply != NULL);

    pb_field first;
    char ctr[128] = "";
    uint64_t shares = 0;
    int n = pb_count(req, len, F_UPDATES_REQ_UPDATE);
    TH_CHECK(n >= 1);
    if (pb_get(req, len, F_UPDATES_REQ_UPDATE, 0, &first))
        shares = msg_update_cpu_shares(first.data, first.len, ctr, sizeof ctr);

    if (rt->update_error) {
        TH_CHECK(nri_reply_set_error(reply, rt->update_error) == NRI_STATUS_OK);
    } else if (rt->fail_first_update && n >= 1) {
        pb rsp = { 0 };
        pb_bytes(&rsp, F_UPDATES_RSP_FAILED, first.data, first.len);
        TH_CHECK(nri_reply_set_data(reply, rsp.data, rsp.len) == NRI_STATUS_OK);
        pb_free(&rsp);
    }

    pthread_mutex_lock(&rt->lock);
    rt->updates++;
    rt->off_main += !th_on_main();
    snprintf(rt->update_ctr, sizeof rt->update_ctr, "%s", ctr);
    rt->update_shares = shares;
    pthread_cond_broadcast(&rt->cond);
    pthread_mutex_unlock(&rt->lock);
}

static void runtime_free(void *user_data)
{
    runtime *rt = user_data;
    TH_CHECK(rt->magic == RUNTIME_MAGIC);
    pthread_mutex_lock(&rt->lock);
    rt->freed++;
    pthread_mutex_unlock(&rt->lock);
}

void runtime_init(runtime *rt)
{
    memset(rt, 0, sizeof *rt);
    rt->magic = RUNTIME_MAGIC;
    pthread_mutex_init(&rt->lock, NULL);
    pthread_cond_init(&rt->cond, NULL);
}

void runtime_destroy(runtime *rt)
{
    pthread_cond_destroy(&rt->cond);
    pthread_mutex_destroy(&rt->lock);
}

nri_callbacks runtime_callbacks(runtime *rt)
{
    nri_callbacks cbs = { runtime_sync, runtime_update, rt, runtime_free };
    return cbs;
}

int runtime_wait(runtime *rt, const int *counter, int n, int timeout_ms)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&rt->lock);
    int rc = 0;
    while (*counter < n && rc == 0)
        rc = pthread_cond_timedwait(&rt->cond, &rt->lock, &deadline);
    int reached = *counter >= n;
    pthread_mutex_unlock(&rt->lock);
    return reached;
}

/* ---- Adaptations ------------------------------------------------------- */

nri_options *test_options(const tmpdir *d, int external)
{
    char path[512];
    nri_error *err = NULL;
    nri_options *opts = nri_options_new();
    assert_non_null(opts);
    tmp_join(path, sizeof path, d, "plugins");
    assert_ok(nri_options_set_plugin_path(opts, path, &err), &err);
    tmp_join(path, sizeof path, d, "conf");
    assert_ok(nri_options_set_plugin_config_path(opts, path, &err), &err);
    if (external) {
        tmp_join(path, sizeof path, d, "nri.sock");
        assert_ok(nri_options_set_socket_path(opts, path, &err), &err);
    } else {
        assert_ok(nri_options_disable_external_connections(opts, &err), &err);
    }
    return opts;
}

nri_adaptation *new_adaptation(runtime *rt, nri_options *opts)
{
    nri_callbacks cbs = runtime_callbacks(rt);
    nri_adaptation *a = NULL;
    nri_error *err = NULL;
    assert_ok(nri_adaptation_new("c-test", "1.0", &cbs, opts, &a, &err), &err);
    assert_non_null(a);
    return a;
}

/* ---- A recording builtin plugin --------------------------------------- */

#define RECORDER_MAGIC 0x52454331u

static atomic_uint next_seq;

static void recorder_reply(recorder *r, nri_builtin_op op, const uint8_t *req, size_t len,
                           nri_reply *reply)
{
    pb rsp = { 0 }, upd = { 0 };
    pb_field more;
    if (r->update_ctr)
        msg_cpu_update(&upd, r->update_ctr, r->update_shares);
    switch (op) {
    case NRI_BUILTIN_OP_CREATE_CONTAINER:
        if (r->env_key)
            msg_create_response_env(&rsp, r->env_key, r->env_value);
        if (r->update_ctr)
            pb_message(&rsp, F_CREATE_RSP_UPDATE, &upd);
        break;
    case NRI_BUILTIN_OP_SYNCHRONIZE:
        /* A message of a split sync is answered as a stub does: `more`
         * echoed, no updates until the last. */
        if (pb_get(req, len, F_SYNC_MORE, 0, &more) && more.varint) {
            pb_varint(&rsp, F_SYNC_RSP_MORE, 1);
            break;
        }
        if (r->update_ctr)
            pb_message(&rsp, F_UPDATE_RSP_UPDATE, &upd);
        break;
    case NRI_BUILTIN_OP_UPDATE_CONTAINER:
    case NRI_BUILTIN_OP_STOP_CONTAINER:
        /* SynchronizeResponse, UpdateContainerResponse and
         * StopContainerResponse all have `update` as field 1. */
        if (r->update_ctr)
            pb_message(&rsp, F_UPDATE_RSP_UPDATE, &upd);
        break;
    default:
        break;
    }
    if (rsp.len > 0)
        TH_CHECK(nri_reply_set_data(reply, rsp.data, rsp.len) == NRI_STATUS_OK);
    pb_free(&rsp);
    pb_free(&upd);
}

static void recorder_handle(void *user_data, nri_builtin_op op, const uint8_t *req, size_t len,
                            nri_reply *reply)
{
    recorder *r = user_data;
    TH_CHECK(r != NULL && r->magic == RECORDER_MAGIC);
    TH_CHECK(req != NULL || len == 0);
    TH_CHECK(reply != NULL);

    pthread_mutex_lock(&r->lock);
    if (r->n < MAX_SEEN) {
        seen_call *c = &r->calls[r->n++];
        c->op = op;
        c->len = len;
        c->req = malloc(len ? len : 1);
        if (c->req && len)
            memcpy(c->req, req, len);
        c->off_main = !th_on_main();
        c->seq = atomic_fetch_add(&next_seq, 1);
    }
    pthread_mutex_unlock(&r->lock);

    static const uint8_t garbage[] = { 0xff, 0xff, 0xff };
    if (r->fail_message && op == r->fail_op)
        TH_CHECK(nri_reply_set_error(reply, r->fail_message) == NRI_STATUS_OK);
    else if (op == r->garbage_op)
        TH_CHECK(nri_reply_set_data(reply, garbage, sizeof garbage) == NRI_STATUS_OK);
    else
        recorder_reply(r, op, req, len, reply);
}

static void recorder_free(void *user_data)
{
    recorder *r = user_data;
    TH_CHECK(r->magic == RECORDER_MAGIC);
    pthread_mutex_lock(&r->lock);
    r->freed++;
    pthread_mutex_unlock(&r->lock);
}

void recorder_init(recorder *r)
{
    memset(r, 0, sizeof *r);
    r->magic = RECORDER_MAGIC;
    pthread_mutex_init(&r->lock, NULL);
}

void recorder_destroy(recorder *r)
{
    for (int i = 0; i < r->n; i++)
        free(r->calls[i].req);
    r->n = 0;
    pthread_mutex_destroy(&r->lock);
}

nri_builtin_plugin recorder_plugin(recorder *r, const char *name, const char *index, int32_t events)
{
    nri_builtin_plugin p = { name, index, events, recorder_handle, r, recorder_free };
    return p;
}

const seen_call *recorder_last(recorder *r, nri_builtin_op op)
{
    for (int i = r->n - 1; i >= 0; i--)
        if (r->calls[i].op == op)
            return &r->calls[i];
    return NULL;
}

int recorder_count(recorder *r, nri_builtin_op op)
{
    int n = 0;
    for (int i = 0; i < r->n; i++)
        n += r->calls[i].op == op;
    return n;
}

/* ---- The usual test fixture ------------------------------------------ */

int fixture_setup(void **state)
{
    fixture *f = test_calloc(1, sizeof *f);
    tmp_make(&f->dir);
    runtime_init(&f->rt);
    recorder_init(&f->rec);
    recorder_init(&f->rec2);
    f->opts = test_options(&f->dir, 0);
    *state = f;
    return 0;
}

int fixture_teardown(void **state)
{
    fixture *f = *state;
    nri_options_free(f->opts);
    nri_adaptation_free(f->a);
    if (f->child > 0) {
        kill(f->child, SIGKILL);
        waitpid(f->child, NULL, 0);
    }
    while (f->nkept > 0) {
        f->nkept--;
        if (f->kept[f->nkept].release)
            f->kept[f->nkept].release(f->kept[f->nkept].mem);
        free(f->kept[f->nkept].mem);
    }
    recorder_destroy(&f->rec);
    recorder_destroy(&f->rec2);
    runtime_destroy(&f->rt);
    tmp_remove(&f->dir);
    test_free(f);
    return th_teardown(state);
}

void *fixture_keep(fixture *f, size_t size, void (*release)(void *))
{
    assert_true(f->nkept < (int)(sizeof f->kept / sizeof f->kept[0]));
    /* Not test_calloc: cmocka frees what a test allocated and did not free
     * as soon as the test function is done, before the teardown. */
    void *mem = calloc(1, size);
    assert_non_null(mem);
    f->kept[f->nkept].mem = mem;
    f->kept[f->nkept].release = release;
    f->nkept++;
    return mem;
}

void fixture_external(fixture *f)
{
    nri_options_free(f->opts);
    f->opts = test_options(&f->dir, 1);
}

void fixture_add(fixture *f, recorder *r, const char *name, const char *index, int32_t events)
{
    nri_error *err = NULL;
    nri_builtin_plugin p = recorder_plugin(r, name, index, events);
    assert_ok(nri_options_add_builtin_plugin(f->opts, &p, &err), &err);
}

nri_adaptation *fixture_new(fixture *f)
{
    f->a = new_adaptation(&f->rt, f->opts);
    f->opts = NULL;
    return f->a;
}

nri_adaptation *fixture_start(fixture *f)
{
    nri_error *err = NULL;
    fixture_new(f);
    assert_ok(nri_adaptation_start(f->a, &err), &err);
    return f->a;
}
