/* vision_dnnl.c — the per-thread cache of oneDNN plans and their replay
 * (vision_dnnl.h). */
#include <omp.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include <pthread.h>
#include <string.h>

#include "../base/base_int.h"
#include "vision_dnnl.h"

#define PAD_RANGE (-1) /* offset of a scratchpad memory: the plan's shared scratchpad range */

typedef struct entry {
    void *key;
    size_t keylen;
    tl_vd_plan *plan;
} entry;

/* One per thread that ran a vision kernel. */
typedef struct thread_cache {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    entry *e;
    int n, cap;
} thread_cache;

static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t cache_key;
static int key_err;

static void plan_destroy(tl_vd_plan *p)
{
    if (p == NULL)
        return;
    for (int s = 0; s < p->nsteps; s++)
        dnnl_primitive_destroy(p->step[s].prim);
    for (int m = 0; m < p->nmem; m++)
        dnnl_memory_destroy(p->mem[m]);
    tl_free(p);
}

static void cache_destroy(void *arg)
{
    thread_cache *c = arg;
    if (c == NULL)
        return;
    for (int i = 0; i < c->n; i++) {
        plan_destroy(c->e[i].plan);
        tl_free(c->e[i].key);
    }
    tl_free(c->e);
    if (c->stream != NULL)
        dnnl_stream_destroy(c->stream);
    if (c->engine != NULL)
        dnnl_engine_destroy(c->engine);
    tl_free(c);
}

static void make_key(void)
{
    key_err = pthread_key_create(&cache_key, cache_destroy);
}

/* One thread for oneDNN on this thread; see the header. */
static void one_thread(void)
{
    if (omp_get_max_threads() != 1)
        omp_set_num_threads(1);
}

tl_status tl_vd_fail(const tl_vd_plan *p, dnnl_status_t s, const char *call)
{
    tl_status st = s == dnnl_out_of_memory ? TL_ENOMEM : s == dnnl_unimplemented ? TL_ENOTIMPL : TL_ERUNTIME;
    return tl_error(st, "%s: oneDNN %s failed: %s", p != NULL && p->what != NULL ? p->what : "vision", call,
                    dnnl_status2str(s));
}

static tl_status thread_cache_get(thread_cache **out)
{
    pthread_once(&key_once, make_key);
    if (key_err != 0)
        return tl_error(TL_ERUNTIME, "vision kernels: pthread_key_create failed (%d)", key_err);
    thread_cache *c = pthread_getspecific(cache_key);
    if (c == NULL) {
        c = tl_calloc(1, sizeof *c);
        if (c == NULL)
            return tl_error_oom();
        dnnl_status_t s = dnnl_engine_create(&c->engine, dnnl_cpu, 0);
        if (s == dnnl_success)
            s = dnnl_stream_create(&c->stream, c->engine, dnnl_stream_default_flags);
        if (s != dnnl_success || pthread_setspecific(cache_key, c) != 0) {
            cache_destroy(c);
            return s != dnnl_success ? tl_vd_fail(NULL, s, "engine or stream creation")
                                     : tl_error(TL_ENOMEM, "vision kernels: pthread_setspecific failed");
        }
    }
    *out = c;
    return TL_OK;
}

tl_status tl_vd_get(const void *key, size_t keylen, const char *what, tl_vd_build_fn build, const void *ctx,
                    tl_vd_plan **out)
{
    *out = NULL;
    one_thread();
    thread_cache *c;
    tl_status st = thread_cache_get(&c);
    if (st != TL_OK)
        return st;
    for (int i = 0; i < c->n; i++)
        if (c->e[i].keylen == keylen && memcmp(c->e[i].key, key, keylen) == 0) {
            *out = c->e[i].plan;
            return TL_OK;
        }
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 16;
        entry *e = tl_realloc(c->e, (size_t)cap * sizeof *e);
        if (e == NULL)
            return tl_error_oom();
        c->e = e;
        c->cap = cap;
    }
    tl_vd_plan *p = tl_calloc(1, sizeof *p);
    void *k = tl_malloc(keylen);
    if (p == NULL || k == NULL) {
        tl_free(p);
        tl_free(k);
        return tl_error_oom();
    }
    memcpy(k, key, keylen);
    p->engine = c->engine;
    p->what = what;
    st = build(p, ctx);
    if (st != TL_OK) {
        plan_destroy(p);
        tl_free(k);
        return st;
    }
    c->e[c->n++] = (entry){k, keylen, p};
    *out = p;
    return TL_OK;
}

static int64_t align_up(int64_t x)
{
    return (x + TL_VD_ALIGN - 1) / TL_VD_ALIGN * TL_VD_ALIGN;
}

/* Bytes of the ranges (not the scratchpad) and of the shared scratchpad. */
typedef struct plan_room {
    int64_t ranges, pad;
} plan_room;

static plan_room room_of(const tl_vd_plan *p)
{
    plan_room r = {0, 0};
    for (int m = 0; m < p->nmem; m++) {
        if (p->slot[m] != TL_VD_SCRATCH)
            continue;
        const dnnl_memory_desc_t *md;
        dnnl_memory_get_memory_desc(p->mem[m], &md);
        int64_t size = align_up((int64_t)dnnl_memory_desc_get_size(md));
        if (p->offset[m] == PAD_RANGE)
            r.pad = size > r.pad ? size : r.pad;
        else
            r.ranges = p->offset[m] + size > r.ranges ? p->offset[m] + size : r.ranges;
    }
    return r;
}

static void update_scratch(tl_vd_plan *p)
{
    plan_room r = room_of(p);
    p->scratch_bytes = TL_VD_ALIGN + r.ranges + r.pad;
}

static int add_mem(tl_vd_plan *p, const dnnl_memory_desc_t *md, int slot, int64_t offset)
{
    if (p->nmem == TL_VD_MAX_MEMS)
        return tl_error(TL_ERUNTIME, "%s: a plan of more than %d memories", p->what, TL_VD_MAX_MEMS);
    dnnl_memory_t m;
    dnnl_status_t s = dnnl_memory_create(&m, md, p->engine, DNNL_MEMORY_NONE);
    if (s != dnnl_success)
        return tl_vd_fail(p, s, "dnnl_memory_create");
    p->mem[p->nmem] = m;
    p->slot[p->nmem] = slot;
    p->offset[p->nmem] = offset;
    p->nmem++;
    update_scratch(p);
    return p->nmem - 1;
}

int tl_vd_mem(tl_vd_plan *p, const dnnl_memory_desc_t *md, int slot)
{
    return add_mem(p, md, slot, slot == TL_VD_SCRATCH ? room_of(p).ranges : 0);
}

dnnl_primitive_attr_t tl_vd_attr(const tl_vd_plan *p)
{
    dnnl_primitive_attr_t a;
    dnnl_status_t s = dnnl_primitive_attr_create(&a);
    if (s == dnnl_success) {
        s = dnnl_primitive_attr_set_scratchpad_mode(a, dnnl_scratchpad_mode_user);
        if (s != dnnl_success)
            dnnl_primitive_attr_destroy(a);
    }
    if (s != dnnl_success) {
        tl_vd_fail(p, s, "dnnl_primitive_attr_create");
        return NULL;
    }
    return a;
}

tl_status tl_vd_step_add(tl_vd_plan *p, const_dnnl_primitive_desc_t pd, int nargs, const int *arg, const int *mem)
{
    if (p->nsteps == TL_VD_MAX_STEPS || nargs + 1 > TL_VD_MAX_ARGS)
        return tl_error(TL_ERUNTIME, "%s: a plan of more than %d steps or %d arguments", p->what, TL_VD_MAX_STEPS,
                        TL_VD_MAX_ARGS);
    tl_vd_step *st = &p->step[p->nsteps];
    for (int a = 0; a < nargs; a++)
        st->args[a] = (dnnl_exec_arg_t){arg[a], p->mem[mem[a]]};
    st->nargs = nargs;
    const dnnl_memory_desc_t *pad = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    if (pad != NULL && dnnl_memory_desc_get_size(pad) > 0) {
        int m = add_mem(p, pad, TL_VD_SCRATCH, PAD_RANGE);
        if (m < 0)
            return (tl_status)m;
        st->args[st->nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, p->mem[m]};
    }
    dnnl_status_t s = dnnl_primitive_create(&st->prim, pd);
    if (s != dnnl_success)
        return tl_vd_fail(p, s, "dnnl_primitive_create");
    p->nsteps++;
    return TL_OK;
}

/* A reorder step from memory a to memory b. */
static tl_status reorder(tl_vd_plan *p, int from, int to)
{
    const dnnl_memory_desc_t *fmd, *tmd;
    dnnl_memory_get_memory_desc(p->mem[from], &fmd);
    dnnl_memory_get_memory_desc(p->mem[to], &tmd);
    dnnl_primitive_attr_t a = tl_vd_attr(p);
    if (a == NULL)
        return tl_last_status();
    dnnl_primitive_desc_t pd;
    dnnl_status_t s = dnnl_reorder_primitive_desc_create(&pd, fmd, p->engine, tmd, p->engine, a);
    dnnl_primitive_attr_destroy(a);
    if (s != dnnl_success)
        return tl_vd_fail(p, s, "reorder");
    tl_status st = tl_vd_step_add(p, pd, 2, (const int[]){DNNL_ARG_FROM, DNNL_ARG_TO}, (const int[]){from, to});
    dnnl_primitive_desc_destroy(pd);
    return st;
}

int tl_vd_input(tl_vd_plan *p, const dnnl_memory_desc_t *want, const dnnl_memory_desc_t *user, int slot)
{
    return tl_vd_input_into(p, want, user, slot, TL_VD_SCRATCH);
}

int tl_vd_input_into(tl_vd_plan *p, const dnnl_memory_desc_t *want, const dnnl_memory_desc_t *user, int slot,
                     int into)
{
    if (dnnl_memory_desc_equal(want, user))
        return tl_vd_mem(p, user, slot);
    int u = tl_vd_mem(p, user, slot);
    if (u < 0)
        return u;
    int m = tl_vd_mem(p, want, into);
    if (m < 0)
        return m;
    if (into != TL_VD_SCRATCH)
        p->kept_bytes = (int64_t)dnnl_memory_desc_get_size(want);
    tl_status st = reorder(p, u, m);
    return st == TL_OK ? m : (int)st;
}

int tl_vd_output(tl_vd_plan *p, const dnnl_memory_desc_t *got, const dnnl_memory_desc_t *user, int slot)
{
    return dnnl_memory_desc_equal(got, user) ? tl_vd_mem(p, user, slot) : tl_vd_mem(p, got, TL_VD_SCRATCH);
}

tl_status tl_vd_output_done(tl_vd_plan *p, int mem, const dnnl_memory_desc_t *user, int slot)
{
    if (p->slot[mem] == slot)
        return TL_OK;
    int u = tl_vd_mem(p, user, slot);
    if (u < 0)
        return (tl_status)u;
    return reorder(p, mem, u);
}

tl_status tl_vd_run(tl_vd_plan *p, void *const *slots, void *scratch, int64_t scratch_bytes)
{
    one_thread();
    thread_cache *c;
    tl_status st = thread_cache_get(&c);
    if (st != TL_OK)
        return st;
    if (scratch_bytes < p->scratch_bytes)
        return tl_error(TL_EINVAL, "%s: %lld bytes of scratch given, the plan needs %lld", p->what,
                        (long long)scratch_bytes, (long long)p->scratch_bytes);
    char *base = (char *)(((uintptr_t)scratch + TL_VD_ALIGN - 1) / TL_VD_ALIGN * TL_VD_ALIGN);
    int64_t pad_at = room_of(p).ranges;
    for (int m = 0; m < p->nmem; m++) {
        void *h = p->slot[m] != TL_VD_SCRATCH ? slots[p->slot[m]]
                  : p->offset[m] == PAD_RANGE ? base + pad_at
                                              : base + p->offset[m];
        dnnl_status_t s = dnnl_memory_set_data_handle_v2(p->mem[m], h, c->stream);
        if (s != dnnl_success)
            return tl_vd_fail(p, s, "dnnl_memory_set_data_handle");
    }
    for (int i = 0; i < p->nsteps; i++) {
        dnnl_status_t s = dnnl_primitive_execute(p->step[i].prim, c->stream, p->step[i].nargs, p->step[i].args);
        if (s != dnnl_success)
            return tl_vd_fail(p, s, "dnnl_primitive_execute");
    }
    dnnl_status_t s = dnnl_stream_wait(c->stream);
    return s == dnnl_success ? TL_OK : tl_vd_fail(p, s, "dnnl_stream_wait");
}

dnnl_memory_desc_t tl_vd_nhwc(int64_t n, int64_t c, int64_t h, int64_t w)
{
    dnnl_memory_desc_t md;
    dnnl_dims_t dims = {n, c, h, w};
    dnnl_status_t s = dnnl_memory_desc_init_by_tag(&md, 4, dims, dnnl_f32, dnnl_nhwc);
    TL_ASSERT(s == dnnl_success); /* positive dims of a plain layout */
    return md;
}
