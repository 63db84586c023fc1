/* testutil.c — the helpers of testutil.h; no tests. */
#include "testutil.h"

#include <jansson.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* ---- status assertions -------------------------------------------------- */

void tu_expect_error(tl_status st, tl_status want, const char *fragment, const char *what)
{
    cr_assert_eq(st, want, "%s: got %s, want %s; message: \"%s\"", what, tl_err_name(st), tl_err_name(want),
                 tl_last_error());
    cr_assert_not_null(strstr(tl_last_error(), fragment), "%s: message \"%s\" lacks \"%s\"", what, tl_last_error(),
                       fragment);
}

/* ---- devices and meshes ------------------------------------------------- */

const int tu_dev8[8] = {0, 1, 2, 3, 4, 5, 6, 7};
const int tu_dev4[4] = {0, 1, 2, 3};

tl_devices *tu_devices(int per_host, int hosts, int pid)
{
    tl_devices *d;
    ASSERT_OK(tl_devices_create(per_host, hosts, pid, &d));
    return d;
}

tl_mesh *tu_mesh1(const tl_devices *devs, int64_t n, const char *name)
{
    tl_mesh *m;
    ASSERT_OK(tl_mesh_create(devs, &n, 1, (const char *[]){name}, 1, NULL, 0, &m));
    return m;
}

tl_mesh *tu_mesh2(const tl_devices *devs, int64_t a, int64_t b, const char *na, const char *nb)
{
    tl_mesh *m;
    ASSERT_OK(tl_mesh_create(devs, (int64_t[]){a, b}, 2, (const char *[]){na, nb}, 2, NULL, 0, &m));
    return m;
}

tl_devices *tu_fx_devs;
tl_mesh *tu_fx_mesh;

void tu_fx_mesh_setup(void)
{
    tu_fx_devs = tu_devices(8, 1, 0);
    tu_fx_mesh = tu_mesh2(tu_fx_devs, 4, 2, "data", "model");
}

void tu_fx_mesh_teardown(void)
{
    tl_mesh_destroy(tu_fx_mesh);
    tl_devices_destroy(tu_fx_devs);
}

/* ---- distributions ------------------------------------------------------ */

tl_distribution *tu_model_parallel(const tl_layout_map *map, const char *batch, int P, int pid)
{
    tl_model_parallel_options o;
    tl_model_parallel_options_init(&o);
    o.layout_map = map;
    o.batch_dim_name = batch;
    o.process = (tl_process){P, pid};
    tl_distribution *d;
    ASSERT_OK(tl_model_parallel_create(&o, &d));
    return d;
}

void tu_assert_axes(const tl_layout *l, int rank, const char *const *axes)
{
    cr_assert_not_null(l);
    cr_assert_eq(tl_layout_rank(l), rank);
    for (int i = 0; i < rank; i++) {
        if (axes[i] == NULL)
            cr_assert_null(tl_layout_axis(l, i), "entry %d", i);
        else
            cr_assert_str_eq(tl_layout_axis(l, i), axes[i]);
    }
}

/* ---- configuration ------------------------------------------------------ */

void tu_quiet(void)
{
    tl_set_log_level(TL_LOG_OFF);
}

tl_config *tu_new_config(void)
{
    tl_config *cfg = NULL;
    tl_status st = tl_config_create(&cfg);
    cr_assert_eq(st, TL_OK, "tl_config_create: %s: %s", tl_err_name(st), tl_last_error());
    cr_assert_not_null(cfg, "tl_config_create returned TL_OK and no object");
    return cfg;
}

tl_status tu_load_squoted(tl_config *cfg, const char *squoted)
{
    char text[2048];
    size_t n = strlen(squoted);
    cr_assert_lt(n, sizeof text, "test JSON too long");
    for (size_t i = 0; i <= n; i++)
        text[i] = squoted[i] == '\'' ? '"' : squoted[i];
    return tl_config_load_json(cfg, text, n, "test.json");
}

void tu_load(tl_config *cfg, const char *squoted)
{
    tl_status st = tu_load_squoted(cfg, squoted);
    cr_assert_eq(st, TL_OK, "load_json(%s): %s: %s", squoted, tl_err_name(st), tl_last_error());
}

tl_config *tu_from_json(const char *squoted)
{
    tl_config *cfg = tu_new_config();
    tu_load(cfg, squoted);
    return cfg;
}

tl_config *tu_with_env(const char *squoted_json, const char *tf_config)
{
    tl_config *cfg = tu_from_json(squoted_json);
    char var[1024];
    snprintf(var, sizeof var, "TF_CONFIG=%s", tf_config);
    const char *envp[] = {"HOME=/nonexistent", var, "PATH=/bin", NULL};
    tu_apply_env(cfg, envp);
    return cfg;
}

void tu_set_flag(tl_config *cfg, const char *name, const char *text)
{
    tl_status st = tl_config_set(cfg, name, text, TL_SOURCE_FLAG);
    cr_assert_eq(st, TL_OK, "tl_config_set(%s, %s): %s: %s", name, text, tl_err_name(st), tl_last_error());
}

void tu_apply_env(tl_config *cfg, const char *const *envp)
{
    tl_status st = tl_config_apply_env(cfg, envp);
    cr_assert_eq(st, TL_OK, "apply_env: %s: %s", tl_err_name(st), tl_last_error());
}

const tl_run_config *tu_resolve_ok(tl_config *cfg)
{
    tl_status st = tl_config_resolve(cfg);
    cr_assert_eq(st, TL_OK, "tl_config_resolve: %s: %s", tl_err_name(st), tl_last_error());
    const tl_run_config *rc = tl_config_get(cfg);
    cr_assert_not_null(rc, "tl_config_get is NULL after a successful resolve");
    return rc;
}

void tu_resolve_fails(tl_config *cfg, tl_status want, const char *fragment)
{
    tu_expect_error(tl_config_resolve(cfg), want, fragment, "tl_config_resolve");
    cr_assert_null(tl_config_get(cfg), "tl_config_get must stay NULL after a failed resolve");
}

void tu_json_fails(const char *squoted, tl_status want, const char *fragment)
{
    tl_config *cfg = tu_from_json(squoted);
    tu_resolve_fails(cfg, want, fragment);
    tl_config_destroy(cfg);
}

void tu_source_is(const tl_config *cfg, const char *name, tl_config_source want, const char *desc)
{
    tl_config_source src = (tl_config_source)-1;
    const char *d = NULL;
    tl_status st = tl_config_source_of(cfg, name, &src, &d);
    cr_assert_eq(st, TL_OK, "source_of(%s): %s: %s", name, tl_err_name(st), tl_last_error());
    cr_assert_eq(src, want, "source_of(%s) = %d, want %d", name, (int)src, (int)want);
    cr_assert_not_null(d, "source_of(%s): no description", name);
    cr_assert_str_eq(d, desc, "source_of(%s) description", name);
}

/* ---- files -------------------------------------------------------------- */

uint8_t *tu_slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s: %s (the tests run from the repository root; the external fixtures live in "
                       "../shared/testdata/external)", path, strerror(errno));
    cr_assert_eq(fseek(f, 0, SEEK_END), 0, "%s", path);
    long len = ftell(f);
    cr_assert_geq(len, 0, "%s", path);
    cr_assert_eq(fseek(f, 0, SEEK_SET), 0, "%s", path);
    uint8_t *buf = malloc((size_t)len + 1);
    cr_assert_not_null(buf);
    cr_assert_eq(fread(buf, 1, (size_t)len, f), (size_t)len, "%s: short read", path);
    fclose(f);
    buf[len] = '\0';
    if (n != NULL)
        *n = (size_t)len;
    return buf;
}

void tu_write_temp(char *path, const char *text)
{
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0, "mkstemp %s", path);
    size_t n = strlen(text);
    cr_assert_eq(write(fd, text, n), (ssize_t)n, "write %s", path);
    close(fd);
}

/* ---- allocation failure ------------------------------------------------- */

static void *count_malloc(size_t size, void *ud)
{
    tu_alloc_count *c = ud;
    if (c->calls++ == c->fail_at)
        return NULL;
    void *p = malloc(size);
    if (p != NULL)
        c->live++;
    return p;
}

static void *count_realloc(void *ptr, size_t size, void *ud)
{
    tu_alloc_count *c = ud;
    if (c->calls++ == c->fail_at)
        return NULL;
    void *p = realloc(ptr, size);
    if (p != NULL && ptr == NULL)
        c->live++;
    return p;
}

static void count_free(void *ptr, void *ud)
{
    tu_alloc_count *c = ud;
    if (ptr != NULL)
        c->live--;
    free(ptr);
}

void tu_alloc_hook(tu_alloc_count *count, long fail_at)
{
    *count = (tu_alloc_count){0, fail_at, 0};
    tl_allocator a = {count_malloc, count_realloc, count_free, count};
    tl_set_allocator(&a);
}

void tu_alloc_unhook(void)
{
    tl_set_allocator(NULL);
}

enum { TU_OOM_MAX_RUNS = 100000 };

long tu_oom_sweep(tl_status (*sequence)(void *ctx), void *ctx, const char *name)
{
    tl_status first = sequence(ctx);
    cr_assert_eq(first, TL_OK, "%s fails without any allocation failure: %s: %s", name, tl_err_name(first),
                 tl_last_error());
    long n;
    for (n = 0; n < TU_OOM_MAX_RUNS; n++) {
        tu_alloc_count c;
        tl_clear_error();
        tu_alloc_hook(&c, n);
        tl_status st = sequence(ctx);
        tu_alloc_unhook();
        cr_assert_eq(c.live, 0, "%s, allocation %ld failed: %ld blocks leaked (status %s)", name, n, c.live,
                     tl_err_name(st));
        if (c.calls <= n) {
            cr_assert_eq(st, TL_OK, "%s with no failure injected: %s: %s", name, tl_err_name(st), tl_last_error());
            break;
        }
        cr_assert_eq(st, TL_ENOMEM, "%s, allocation %ld of %ld failed: got %s (\"%s\"), want TL_ENOMEM", name, n,
                     c.calls, tl_err_name(st), tl_last_error());
        cr_assert_not_null(strstr(tl_last_error(), "out of memory"), "%s, allocation %ld: message \"%s\"", name, n,
                           tl_last_error());
    }
    cr_assert_gt(n, 0, "%s made no allocation through the hook", name);
    cr_assert_lt(n, TU_OOM_MAX_RUNS, "%s never ran through", name);
    return n;
}

struct json_t *tu_run_json(const char *cmd, const char *what)
{
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f, "popen(%s) failed", cmd);
    size_t n = 0, cap = 1 << 16;
    char *out = malloc(cap);
    cr_assert_not_null(out);
    for (;;) {
        if (n + 4096 > cap) {
            cap *= 2;
            out = realloc(out, cap);
            cr_assert_not_null(out);
        }
        size_t r = fread(out + n, 1, cap - n - 1, f);
        if (r == 0)
            break;
        n += r;
    }
    out[n] = '\0';
    int status = pclose(f);
    cr_assert_eq(status, 0, "%s failed (status %d; its error is above): %s", what, status, cmd);
    json_error_t jerr;
    json_t *root = json_loads(out, 0, &jerr);
    cr_assert_not_null(root, "%s printed no JSON: %s (line %d)", what, jerr.text, jerr.line);
    free(out);
    return root;
}
