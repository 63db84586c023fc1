/* vars.c — the variable store: names, shapes, initializers, the parameter
 * slab's layout (name order), and initial values from the counter-based RNG. */
#include <math.h>
#include <string.h>

#include "graph_int.h"
#include "tpuloop/rng.h"

tl_status tl_vars_create(tl_vars **out)
{
    *out = tl_calloc(1, sizeof **out);
    return *out ? TL_OK : tl_error_oom();
}

void tl_vars_destroy(tl_vars *vars)
{
    if (vars == NULL)
        return;
    for (int i = 0; i < vars->n; i++)
        tl_free(vars->v[i].name);
    tl_free(vars->v);
    tl_free(vars->by_name);
    tl_free(vars);
}

/* Sorts order[0..n) by variable name: a stable bottom-up merge sort through
 * tmp, because qsort has no context argument and a process-wide one would
 * race when two threads lay out two models. */
static void sort_by_name(const tl_vars *vars, int *order, int *tmp, int n)
{
    for (int width = 1; width < n; width *= 2) {
        for (int lo = 0; lo < n; lo += 2 * width) {
            int mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            int a = lo, b = mid, k = lo;
            while (a < mid && b < hi)
                tmp[k++] = strcmp(vars->v[order[b]].name, vars->v[order[a]].name) < 0 ? order[b++] : order[a++];
            while (a < mid)
                tmp[k++] = order[a++];
            while (b < hi)
                tmp[k++] = order[b++];
        }
        memcpy(order, tmp, (size_t)n * sizeof *order);
    }
}

tl_status tl_vars_layout(tl_vars *vars)
{
    size_t n = (size_t)(vars->n ? vars->n : 1);
    int *order = tl_alloc_array(n, sizeof *order);
    int *tmp = tl_alloc_array(n, sizeof *tmp);
    if (order == NULL || tmp == NULL) {
        tl_free(order);
        tl_free(tmp);
        return tl_error_oom();
    }
    for (int i = 0; i < vars->n; i++)
        order[i] = i;
    sort_by_name(vars, order, tmp, vars->n);
    tl_free(tmp);
    int64_t off = 0;
    for (int k = 0; k < vars->n; k++) {
        tl_var *v = &vars->v[order[k]];
        v->offset = off;
        off += v->size;
    }
    tl_free(vars->by_name);
    vars->by_name = order;
    vars->total = off;
    vars->frozen = true;
    return TL_OK;
}

/* Keras' _compute_fans. */
static void fans(const tl_var *v, double *fan_in, double *fan_out)
{
    if (v->rank == 0) {
        *fan_in = *fan_out = 1;
    } else if (v->rank == 1) {
        *fan_in = *fan_out = (double)v->shape[0];
    } else if (v->rank == 2) {
        *fan_in = (double)v->shape[0];
        *fan_out = (double)v->shape[1];
    } else {
        double receptive = 1;
        for (int i = 0; i < v->rank - 2; i++)
            receptive *= (double)v->shape[i];
        *fan_in = (double)v->shape[v->rank - 2] * receptive;
        *fan_out = (double)v->shape[v->rank - 1] * receptive;
    }
}

/* FNV-1a: the RNG stream of a variable is named by its name, so initial
 * values do not depend on creation order. */
static uint64_t name_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* A normal draw redrawn until within 2 standard deviations (TF's truncated_normal). */
static double truncated(tl_rng *r)
{
    for (;;) {
        double z = tl_rng_normal(r);
        if (fabs(z) <= 2.0)
            return z;
    }
}

void tl_vars_initialize(const tl_vars *vars, uint64_t seed, float *params)
{
    for (int i = 0; i < vars->n; i++) {
        const tl_var *v = &vars->v[i];
        float *p = params + v->offset;
        tl_rng r;
        tl_rng_init(&r, seed, name_hash(v->name), 0, 0);
        double fi, fo;
        fans(v, &fi, &fo);
        const tl_initializer *in = &v->init;
        for (int64_t k = 0; k < v->size; k++) {
            double x = 0;
            switch (in->kind) {
            case TL_INIT_ZEROS: x = 0; break;
            case TL_INIT_CONSTANT: x = in->a; break;
            case TL_INIT_UNIFORM: x = in->a + (in->b - in->a) * tl_rng_uniform_f64(&r); break;
            case TL_INIT_TRUNCATED_NORMAL: x = in->a + in->b * truncated(&r); break;
            case TL_INIT_GLOROT_UNIFORM: {
                double limit = sqrt(6.0 / (fi + fo));
                x = -limit + 2.0 * limit * tl_rng_uniform_f64(&r);
                break;
            }
            case TL_INIT_HE_NORMAL: x = sqrt(2.0 / fi) / 0.87962566103423978 * truncated(&r); break;
            }
            p[k] = (float)x;
        }
    }
}

static tl_status check_init(const char *name, tl_initializer in)
{
    switch (in.kind) {
    case TL_INIT_ZEROS:
    case TL_INIT_GLOROT_UNIFORM:
    case TL_INIT_HE_NORMAL:
        return TL_OK;
    case TL_INIT_CONSTANT:
        return isfinite(in.a) ? TL_OK : tl_error(TL_EINVAL, "variable %s: constant %g is not finite", name, in.a);
    case TL_INIT_UNIFORM:
        return isfinite(in.a) && isfinite(in.b) && in.a < in.b
                   ? TL_OK
                   : tl_error(TL_EINVAL, "variable %s: uniform needs minval < maxval, got [%g, %g)", name, in.a, in.b);
    case TL_INIT_TRUNCATED_NORMAL:
        return isfinite(in.a) && isfinite(in.b) && in.b > 0
                   ? TL_OK
                   : tl_error(TL_EINVAL, "variable %s: truncated normal needs stddev > 0, got %g", name, in.b);
    }
    return tl_error(TL_EINVAL, "variable %s: unknown initializer %d", name, (int)in.kind);
}

/* Finds name, or adds it; an existing name must have the same shape. */
static tl_status find_or_add(tl_vars *vars, const char *name, const int64_t *shape, int rank, tl_initializer init,
                             int *idx)
{
    for (int i = 0; i < vars->n; i++) {
        tl_var *v = &vars->v[i];
        if (strcmp(v->name, name) != 0)
            continue;
        bool same = v->rank == rank && (rank == 0 || memcmp(v->shape, shape, (size_t)rank * sizeof *shape) == 0);
        if (!same)
            return tl_error(TL_EINVAL, "variable %s already exists with another shape (rank %d, %lld elements)", name,
                            v->rank, (long long)v->size);
        *idx = i;
        return TL_OK;
    }
    if (vars->frozen)
        return tl_error(TL_EINVAL, "variable %s is new, but the model's variables were already laid out: every "
                                   "mode must create the same variables", name);
    tl_status st = check_init(name, init);
    if (st != TL_OK)
        return st;
    int64_t size = 1;
    for (int i = 0; i < rank; i++) {
        if (shape[i] < 1 || size > ((int64_t)1 << 40) / shape[i])
            return tl_error(TL_EINVAL, "variable %s: dimension %d has size %lld", name, i, (long long)shape[i]);
        size *= shape[i];
    }
    if (vars->n == vars->cap) {
        int cap = vars->cap ? vars->cap * 2 : 16;
        tl_var *p = tl_realloc(vars->v, (size_t)cap * sizeof *p);
        if (p == NULL)
            return tl_error_oom();
        vars->v = p;
        vars->cap = cap;
    }
    char *copy = tl_strdup(name);
    if (copy == NULL)
        return tl_error_oom();
    tl_var *v = &vars->v[vars->n];
    memset(v, 0, sizeof *v);
    v->name = copy;
    v->rank = rank;
    if (rank > 0)
        memcpy(v->shape, shape, (size_t)rank * sizeof *shape);
    v->size = size;
    v->init = init;
    *idx = vars->n++;
    return TL_OK;
}

tl_status tl_vars_add_ex(tl_vars *vars, const char *name, const int64_t *shape, int rank, tl_initializer init,
                         bool trainable, int *idx)
{
    if (name == NULL || name[0] == '\0')
        return tl_error(TL_EINVAL, "a variable needs a non-empty name");
    if (rank < 0 || rank > TL_MAX_RANK)
        return tl_error(TL_EINVAL, "variable %s: rank %d is outside [0, %d]", name, rank, TL_MAX_RANK);
    int before = vars->n;
    tl_status st = find_or_add(vars, name, shape, rank, init, idx);
    if (st != TL_OK)
        return st;
    tl_var *v = &vars->v[*idx];
    if (vars->n > before)
        v->trainable = trainable;
    else if (v->trainable != trainable)
        return tl_error(TL_EINVAL, "variable %s exists as a %s variable; it cannot also be a %s one", name,
                        v->trainable ? "trainable" : "state", trainable ? "trainable" : "state");
    return TL_OK;
}

tl_status tl_vars_add(tl_vars *vars, const char *name, const int64_t *shape, int rank, tl_initializer init, int *idx)
{
    return tl_vars_add_ex(vars, name, shape, rank, init, true, idx);
}
