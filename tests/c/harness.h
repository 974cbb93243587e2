/* Shared helpers of the C tests: cmocka, thread-safe checks for callback
 * threads, the runtime callbacks, temp dirs, adaptations that touch
 * nothing outside a temp dir, and a recording builtin plugin. */
#ifndef NRI_C_TESTS_HARNESS_H
#define NRI_C_TESTS_HARNESS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <pthread.h>

#include "nri.h"
#include "nri_msgs.h"
#include "pb.h"

/* ---- Checks on callback threads ---------------------------------------
 * cmocka's asserts longjmp and are not thread-safe, so callbacks (which
 * run on the library's threads) record failures with TH_CHECK; the test
 * checks them on the main thread with th_assert_clean(), as libgit2's clar
 * tests do with cl_git_thread_err. */
void th_fail(const char *file, int line, const char *what);
#define TH_CHECK(cond) ((cond) ? (void)0 : th_fail(__FILE__, __LINE__, #cond))
/* Fails the running test if a callback recorded a failure; clears them. */
void th_assert_clean(void);
/* Whether the caller runs on the thread that called harness_init(). */
int th_on_main(void);
/* Records the main thread; call first thing in main(). */
void harness_init(void);
/* cmocka teardown: th_assert_clean() after every test. */
int th_teardown(void **state);
#define TEST(f) cmocka_unit_test_teardown(f, th_teardown)

/* ---- Statuses and errors ---------------------------------------------- */
/* Fails unless `st` is NRI_STATUS_OK, printing the error's message. Frees
 * and clears `*err`. */
#define assert_ok(st, err) assert_ok_((st), (err), #st, __FILE__, __LINE__)
void assert_ok_(nri_status st, nri_error **err, const char *call, const char *file, int line);
/* Fails unless `st` is `want`, `*err` was written with the same status and
 * a message containing `text` (NULL: any). Frees and clears `*err`. */
#define assert_fails(st, err, want, text) \
    assert_fails_((st), (err), (want), (text), #st, __FILE__, __LINE__)
void assert_fails_(nri_status st, nri_error **err, nri_status want, const char *text,
                   const char *call, const char *file, int line);

/* ---- Temp dirs --------------------------------------------------------- */
typedef struct tmpdir {
    char path[200];
} tmpdir;
void tmp_make(tmpdir *d);
void tmp_remove(tmpdir *d);
/* `dir/name` into `out` (PATH_MAX). */
void tmp_join(char *out, size_t cap, const tmpdir *d, const char *name);
void write_file(const char *path, const char *content, unsigned mode);
/* The whole file, malloc'ed and NUL-terminated, or NULL. */
char *read_file(const char *path);

/* ---- The runtime's callbacks ------------------------------------------ */
#define RUNTIME_MAGIC 0x4e524931u

typedef struct runtime {
    uint32_t magic;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    /* Behaviour, set before starting. */
    const char *sync_error;    /* sync replies with this error */
    const char *update_error;  /* update replies with this error */
    int sync_garbage;          /* sync hands garbage to nri_sync_cb_call */
    int fail_first_update;     /* update lists its first update as failed */
    /* What was seen. */
    int syncs, updates, freed;
    int off_main;              /* callbacks that ran off the main thread */
    nri_status sync_status;    /* of the last nri_sync_cb_call */
    char sync_message[256];    /* its error message */
    int sync_updates;          /* updates it returned */
    char update_ctr[128];      /* first update of the last request */
    uint64_t update_shares;
} runtime;

void runtime_init(runtime *rt);
void runtime_destroy(runtime *rt);
nri_callbacks runtime_callbacks(runtime *rt);
/* Waits until `*counter` (a field of rt) reaches n; 1 if it did. */
int runtime_wait(runtime *rt, const int *counter, int n, int timeout_ms);

/* ---- Adaptations ------------------------------------------------------- */
/* Options that touch nothing outside `d`: plugins from d/plugins, configs
 * from d/conf, socket d/nri.sock (`external`) or no socket. */
nri_options *test_options(const tmpdir *d, int external);
/* nri_adaptation_new("c-test", "1.0", ...), asserting success. */
nri_adaptation *new_adaptation(runtime *rt, nri_options *opts);

/* ---- Real plugins ------------------------------------------------------
 * Installs the Rust binary `binary` (from the cargo release dir) as the
 * pre-installed plugin `name` ("NN-base") of d/plugins, with `config` (if
 * not NULL) as its drop-in d/conf/NN-base.conf. */
void install_plugin(const tmpdir *d, const char *binary, const char *name, const char *config);
/* The path of a Rust binary of the cargo release dir. */
void bin_path(char *out, size_t cap, const char *binary);
/* Waits until the file contains `text`; 1 if it did within timeout_ms. */
int wait_for_text(const char *path, const char *text, int timeout_ms);
void sleep_ms(int ms);

/* ---- A recording builtin plugin --------------------------------------- */
#define MAX_SEEN 64

typedef struct seen_call {
    nri_builtin_op op;
    uint8_t *req;
    size_t len;
    int off_main;
    unsigned seq;   /* order among all recorders' calls */
} seen_call;

typedef struct recorder {
    uint32_t magic;
    pthread_mutex_t lock;
    seen_call calls[MAX_SEEN];
    int n;
    int freed;
    /* Replies: env added on CreateContainer (NULL: none), error for one op. */
    const char *env_key, *env_value;
    nri_builtin_op fail_op;
    const char *fail_message;
    /* Replies bytes that are no protobuf message to this op. */
    nri_builtin_op garbage_op;
    /* CreateContainer: also update `update_ctr` (if set) with these shares. */
    const char *update_ctr;
    uint64_t update_shares;
} recorder;

void recorder_init(recorder *r);
void recorder_destroy(recorder *r);
/* An nri_builtin_plugin handled by the recorder. */
nri_builtin_plugin recorder_plugin(recorder *r, const char *name, const char *index, int32_t events);
/* The last call for `op`, or NULL. Only between events (no lock). */
const seen_call *recorder_last(recorder *r, nri_builtin_op op);
int recorder_count(recorder *r, nri_builtin_op op);

/* ---- The usual test fixture ------------------------------------------
 * A temp dir, the runtime's callbacks, two recorders and options that
 * touch nothing outside the temp dir (no socket); the adaptation made
 * from them. The teardown releases whatever is left and checks the
 * callback threads' findings. */
typedef struct fixture {
    tmpdir dir;
    runtime rt;
    recorder rec, rec2;
    nri_options *opts;      /* until fixture_new consumes them */
    nri_adaptation *a;
    int child;              /* a plugin process to kill at the end, or 0 */
    struct {
        void *mem;
        void (*release)(void *);
    } kept[8];              /* fixture_keep's, released in teardown */
    int nkept;
} fixture;

int fixture_setup(void **state);
int fixture_teardown(void **state);
#define FIXTURE_TEST(fn) cmocka_unit_test_setup_teardown(fn, fixture_setup, fixture_teardown)
/* Replaces the options with ones that open the socket d/nri.sock. */
void fixture_external(fixture *f);
/* Adds recorder `r` as builtin plugin `index`-`name`. */
void fixture_add(fixture *f, recorder *r, const char *name, const char *index, int32_t events);
/* Makes the adaptation of the options (consuming them). */
nri_adaptation *fixture_new(fixture *f);
/* fixture_new and nri_adaptation_start, asserting success. */
nri_adaptation *fixture_start(fixture *f);
/* Zeroed memory for whatever the adaptation's callbacks or a plugin's
 * thread use, kept until teardown, where `release` (if not NULL) runs on
 * it once the adaptation is freed. A failed assertion leaves the test
 * function at once (cmocka longjmps to its runner), so such state must not
 * live on the test's stack: the teardown that frees the adaptation would
 * call back into a dead frame. */
void *fixture_keep(fixture *f, size_t size, void (*release)(void *));

#endif
