/*
 * testutil.h — helpers the test files share: status assertions, device and
 * mesh fixtures, distribution helpers, configuration helpers, temporary
 * files, and the allocation-failure sweep. testutil.c holds no tests.
 *
 * Every helper that checks something fails the running test with a Criterion
 * assertion, so a test can call it and carry on with its result.
 */
#ifndef TPULOOP_TESTS_TESTUTIL_H
#define TPULOOP_TESTS_TESTUTIL_H

#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "tpuloop/tpuloop.h"

/* ---- reference scripts ------------------------------------------------ */

/* Runs the shell command cmd (a reference script under /usr/bin/python3, run
 * from the repository root), fails the test when it exits non-zero or prints
 * anything but one JSON value, and returns that value (json_decref it). what
 * names the script in the messages. */
struct json_t;
struct json_t *tu_run_json(const char *cmd, const char *what);

/* ---- status assertions -------------------------------------------------- */

/* call returns TL_OK; otherwise the test fails with the status and message. */
#define ASSERT_OK(call)                                                                             \
    do {                                                                                            \
        tl_status st_ = (call);                                                                     \
        cr_assert_eq(st_, TL_OK, "%s failed: %s: %s", #call, tl_err_name(st_), tl_last_error());  \
    } while (0)

/* call returns status, and the last error message contains frag. */
#define ASSERT_ERR(call, status, frag)                                                              \
    do {                                                                                            \
        tl_status st_ = (call);                                                                     \
        cr_assert_eq(st_, (status), "%s: got %s (%s), want %s", #call, tl_err_name(st_),           \
                     tl_last_error(), tl_err_name(status));                                         \
        cr_assert(strstr(tl_last_error(), (frag)) != NULL, "message \"%s\" lacks \"%s\"",           \
                  tl_last_error(), (frag));                                                         \
    } while (0)

/* st is want, and the last error message contains fragment; what names the
 * call in the failure message. */
void tu_expect_error(tl_status st, tl_status want, const char *fragment, const char *what);

/* ---- devices and meshes ------------------------------------------------- */

extern const int tu_dev8[8]; /* device ids 0..7 */
extern const int tu_dev4[4]; /* device ids 0..3 */

/* per_host virtual devices on each of hosts hosts, seen from process pid. */
tl_devices *tu_devices(int per_host, int hosts, int pid);

/* A mesh of n devices on one axis, and one of a x b devices on two. */
tl_mesh *tu_mesh1(const tl_devices *devs, int64_t n, const char *name);
tl_mesh *tu_mesh2(const tl_devices *devs, int64_t a, int64_t b, const char *na, const char *nb);

/* A suite fixture (.init = tu_fx_mesh_setup, .fini = tu_fx_mesh_teardown):
 * 8 devices, tu_fx_devs, and the mesh (4, 2) ["data", "model"] on them,
 * tu_fx_mesh. */
extern tl_devices *tu_fx_devs;
extern tl_mesh *tu_fx_mesh;
void tu_fx_mesh_setup(void);
void tu_fx_mesh_teardown(void);

/* ---- distributions ------------------------------------------------------ */

/* ModelParallel over map with batch dimension batch (NULL for the default),
 * process pid of P; expects TL_OK. */
tl_distribution *tu_model_parallel(const tl_layout_map *map, const char *batch, int P, int pid);

/* l is non-NULL, of rank rank, and entry i is axes[i] (NULL: replicated). */
void tu_assert_axes(const tl_layout *l, int rank, const char *const *axes);

/* ---- configuration ------------------------------------------------------ */

/* A suite .init that turns logging off. */
void tu_quiet(void);

tl_config *tu_new_config(void);

/* Loads JSON written with ' for " (so tests stay readable) as the file
 * "test.json": tu_load_squoted returns the status, tu_load expects TL_OK, and
 * tu_from_json does so into a new configuration. */
tl_status tu_load_squoted(tl_config *cfg, const char *squoted);
void tu_load(tl_config *cfg, const char *squoted);
tl_config *tu_from_json(const char *squoted);

/* tu_from_json(squoted_json) with TF_CONFIG=tf_config in its environment. */
tl_config *tu_with_env(const char *squoted_json, const char *tf_config);

/* Sets an option as the flag --name=text; expects TL_OK. */
void tu_set_flag(tl_config *cfg, const char *name, const char *text);

/* Applies the NULL-terminated environment envp; expects TL_OK. */
void tu_apply_env(tl_config *cfg, const char *const *envp);

/* Resolves; expects TL_OK and returns the resolved configuration. */
const tl_run_config *tu_resolve_ok(tl_config *cfg);

/* Resolving fails with want and a message containing fragment, and leaves
 * tl_config_get NULL. */
void tu_resolve_fails(tl_config *cfg, tl_status want, const char *fragment);

/* tu_from_json(squoted), then tu_resolve_fails, then frees. */
void tu_json_fails(const char *squoted, tl_status want, const char *fragment);

/* The option's source is want, described as desc. */
void tu_source_is(const tl_config *cfg, const char *name, tl_config_source want, const char *desc);

/* ---- files -------------------------------------------------------------- */

/* Creates the file of mkstemp template path (rewritten in place) holding text. */
void tu_write_temp(char *path, const char *text);

/* The whole file at path, malloc'd with a '\0' after its *n bytes (n may be
 * NULL); the test fails if it cannot be read. */
uint8_t *tu_slurp(const char *path, size_t *n);

/* ---- allocation failure ------------------------------------------------- */

/* What the counting allocator has seen since tu_alloc_hook. */
typedef struct tu_alloc_count {
    long calls;   /* malloc and realloc calls so far */
    long fail_at; /* the call that returns NULL (0-based); -1 for none */
    long live;    /* blocks handed out and not yet freed */
} tu_alloc_count;

/* Routes tpuloop's allocations through a counting allocator that fails call
 * fail_at, counting into *count; tu_alloc_unhook restores malloc. */
void tu_alloc_hook(tu_alloc_count *count, long fail_at);
void tu_alloc_unhook(void);

/*
 * Runs sequence(ctx) once as it is, which must return TL_OK, then again with
 * allocation 0, 1, 2, ... failing until a run makes no more allocations than
 * that and so meets no failure; that run must return TL_OK. Every run that
 * meets a failure must return TL_ENOMEM with "out of memory" in the message,
 * and every run must free each block it allocated. So the sequence frees what
 * it makes, and a failed allocation anywhere in it, checks included, must end
 * in TL_ENOMEM. name says what the sequence does in failure messages. Returns
 * the number of runs that met a failure (at least 1).
 */
long tu_oom_sweep(tl_status (*sequence)(void *ctx), void *ctx, const char *name);

#endif /* TPULOOP_TESTS_TESTUTIL_H */
