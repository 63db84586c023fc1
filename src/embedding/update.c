/* update.c — the update of a step, applied once per touched row by the
 * row's owner, inside the send that completes the step (or, pipelined,
 * after the next step's activations). With one core and only lazy tables
 * ("direct") the core's sums are the step's and are read in place; with
 * several cores, or a non-lazy table, every core's sums are added per
 * (table, id) in ascending core order first. */
#include <string.h>

#include "emb_int.h"

/* ---- the accumulation hash ------------------------------------------------------ */

/* Open addressing over 4-byte slots holding the accumulated row's index
 * (its table and id are in the workspace's arrays): the owned rows of a
 * step, at load <= 1/2, in an array a quarter the size of one of (table,
 * id, value) entries, so that clearing it per step and probing it stay in
 * the caches longer. */
static inline size_t hash_slot(int32_t table, int64_t id, size_t mask)
{
    uint64_t h = (uint64_t)id * 0x9e3779b97f4a7c15ull ^ ((uint64_t)(uint32_t)table * 0xc2b2ae3d27d4eb4full);
    return (size_t)(h ^ (h >> 29)) & mask;
}

/* The index of (table, id), or `fresh` in a new slot when absent (*added
 * true). */
static inline int32_t hash_find_or_add(int32_t *h, size_t cap, const int32_t *a_table, const int64_t *a_id,
                                       int32_t table, int64_t id, int32_t fresh, bool *added)
{
    size_t mask = cap - 1;
    for (size_t i = hash_slot(table, id, mask);; i = (i + 1) & mask) {
        int32_t v = h[i];
        if (v < 0) {
            h[i] = fresh;
            *added = true;
            return fresh;
        }
        if (a_id[v] == id && a_table[v] == table) {
            *added = false;
            return v;
        }
    }
}

static inline int32_t hash_get(const int32_t *h, size_t cap, const int32_t *a_table, const int64_t *a_id,
                               int32_t table, int64_t id)
{
    size_t mask = cap - 1;
    for (size_t i = hash_slot(table, id, mask);; i = (i + 1) & mask) {
        int32_t v = h[i];
        if (v < 0 || (a_id[v] == id && a_table[v] == table))
            return v;
    }
}

TL_VECTOR_CLONES static void add_into(float *restrict y, const float *restrict x, int n)
{
    for (int i = 0; i < n; i++)
        y[i] += x[i];
}

/* ---- the workspace ---------------------------------------------------------------- */

void emb_apply_ws_free(emb_apply_ws *ws)
{
    emb_buf *b[] = {&ws->h,    &ws->ag,     &ws->at,   &ws->aid,  &ws->arow, &ws->steps,
                    &ws->zero, &ws->ustart, &ws->uocc, &ws->gsum, &ws->slots};
    for (size_t k = 0; k < TL_ARRAY_LEN(b); k++)
        emb_buf_free(b[k]);
}

int64_t emb_apply_ws_bytes(const emb_apply_ws *ws)
{
    return (int64_t)(ws->h.cap + ws->ag.cap + ws->at.cap + ws->aid.cap + ws->arow.cap + ws->steps.cap +
                     ws->zero.cap + ws->ustart.cap + ws->uocc.cap + ws->gsum.cap + ws->slots.cap);
}

/* Part `part` of `parts` owns the ids id mod parts == part. The parts are
 * the cores, a power of two as a rule: then the remainder is a mask, not a
 * division per row (the owners test every core's rows). */
typedef struct owner {
    uint64_t part, parts, mask; /* mask: parts - 1 for a power of two, else 0 */
} owner;

static inline owner owner_of(int part, int parts)
{
    uint64_t p = (uint64_t)parts;
    return (owner){(uint64_t)part, p, (p & (p - 1)) == 0 ? p - 1 : 0};
}

static inline bool owned(int64_t id, owner o)
{
    uint64_t r = o.mask != 0 || o.parts == 1 ? (uint64_t)id & o.mask : (uint64_t)id % o.parts;
    return r == o.part;
}

/* Before the update of part `part` of `parts` of `step` (under mu for the
 * serial apply, on the core's own thread for an owner apply): its
 * workspace in ws, so that the update itself cannot fail. The hash is sized
 * to the part's rows, counted, so no skew of the ids can overfill it. */
tl_status emb_apply_reserve(tl_emb_engine *eng, int64_t step, int part, int parts, emb_apply_ws *ws)
{
    int C = eng->cfg.num_tensor_cores;
    int64_t total = 0;
    bool direct = emb_direct(eng), by_dedup = eng->merge_by_dedup;
    for (int c = 0; c < C && !direct && !by_dedup; c++) {
        const emb_core_step *s = emb_find_slot(&eng->cores[c], step);
        TL_ASSERT(s != NULL);
        const int64_t *uid = s->u_id.p;
        if (parts == 1) {
            total += s->n_unique;
            continue;
        }
        owner own = owner_of(part, parts);
        for (int64_t u = 0; u < s->n_unique; u++)
            total += owned(uid[u], own);
    }
    size_t hcap = 64;
    while (hcap < (size_t)total * 2)
        hcap *= 2;
    tl_status st;
    if ((st = emb_reserve(&ws->h, hcap * sizeof(int32_t))) != TL_OK ||
        (st = emb_reserve(&ws->ag, (size_t)(total + 1) * sizeof(float *))) != TL_OK ||
        (st = emb_reserve(&ws->at, (size_t)(total + 1) * sizeof(int32_t))) != TL_OK ||
        (st = emb_reserve(&ws->aid, (size_t)(total + 1) * sizeof(int64_t))) != TL_OK ||
        (st = emb_reserve(&ws->arow, (size_t)(total + 1) * sizeof(float *))) != TL_OK ||
        (st = emb_reserve(&ws->steps, (size_t)eng->cfg.num_tables * sizeof(tl_emb_step))) != TL_OK ||
        (st = emb_reserve(&ws->slots, (size_t)C * sizeof(emb_core_step *))) != TL_OK)
        return st;
    int max_dim = 1;
    for (int i = 0; i < eng->cfg.num_tables; i++)
        max_dim = eng->tables[i].dim > max_dim ? eng->tables[i].dim : max_dim;
    if ((st = emb_reserve(&ws->zero, (size_t)max_dim * sizeof(float))) != TL_OK ||
        (st = emb_reserve(&ws->gsum, (size_t)max_dim * sizeof(float))) != TL_OK)
        return st;
    if (direct) { /* the fused apply's grouping */
        const emb_core_step *s = emb_find_slot(&eng->cores[0], step);
        if ((st = emb_reserve(&ws->ustart, (size_t)(s->n_unique + 1) * sizeof(int32_t))) != TL_OK ||
            (st = emb_reserve(&ws->uocc, (size_t)(s->n_occ + 1) * sizeof(int32_t))) != TL_OK)
            return st;
    }
    ws->hcap = hcap;
    return TL_OK;
}

/* ---- the update -------------------------------------------------------------------- */

/* Table t's pipeline on one row (its slots follow it), from gradient g. */
static inline void update(const emb_table *t, const tl_emb_step *es, float *row, float *g)
{
    float *slots[TL_EMB_MAX_SLOTS];
    for (int k = 0; k < t->slots; k++)
        slots[k] = row + (int64_t)(k + 1) * t->dim;
    tl_emb_update_row(&t->opt, es, row, g, slots, t->dim);
}

/* Rows (with their slots) prefetched ahead of the update, into L2. */
enum { AHEAD = 16 };

/* g = a x, then g += a x for the row's later occurrences: the operations
 * of the send's gradient_feature (step.c), in the same order. */
TL_VECTOR_CLONES static void sum_first(float *restrict g, const float *restrict x, float a, int n)
{
    for (int i = 0; i < n; i++)
        g[i] = a * x[i];
}

TL_VECTOR_CLONES static void sum_more(float *restrict g, const float *restrict x, float a, int n)
{
    for (int i = 0; i < n; i++)
        g[i] += a * x[i];
}

/* The feature of occurrence k: off[f] <= k < off[f + 1]. */
static inline int feature_of(const int64_t *off, int F, int64_t k)
{
    int lo = 0, hi = F - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (off[mid] <= k)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* The direct apply (one core, one host, lazy tables) inside the send, fused
 * with the gradient sums: the occurrences grouped by unique row by a stable
 * counting sort (each row's stay in input order), then per row its sum in a
 * buffer of one row from the send's dL/d(out) — the operations
 * gradients_summed would do, in its order — and at once its update. The
 * n_unique x dim sums are never written out and read back. */
static void apply_direct_fused(const tl_emb_engine *eng, const emb_core_step *s, const tl_emb_step *pes,
                               emb_apply_ws *ws, const float *const *grads)
{
    int F = eng->cfg.num_features;
    int64_t U = s->n_unique, n = s->n_occ;
    const int32_t *pair = emb_occ(s, eng->cfg.num_tables), *ut = s->u_table.p;
    const int64_t *off = s->feat_off.p;
    const float *gain = s->occ_gain.p;
    float *const *uptr = s->u_ptr.p;
    int32_t *start = ws->ustart.p, *occ = ws->uocc.p;
    float *g = ws->gsum.p;
    memset(start, 0, (size_t)(U + 1) * sizeof *start);
    for (int64_t k = 0; k < n; k++)
        start[pair[2 * k + 1] + 1]++;
    for (int64_t u = 0; u < U; u++)
        start[u + 1] += start[u];
    for (int64_t k = 0; k < n; k++) /* then start[u] is where row u's occurrences end */
        occ[start[pair[2 * k + 1]]++] = (int32_t)k;
    int32_t j = 0;
    for (int64_t u = 0; u < U; u++) {
        if (u + AHEAD < U)
            emb_prefetch_l2(uptr[u + AHEAD], eng->tables[ut[u + AHEAD]].stride);
        const emb_table *t = &eng->tables[ut[u]];
        int D = t->dim;
        for (int32_t first = j; j < start[u]; j++) {
            int64_t k = occ[j];
            const float *x = grads[feature_of(off, F, k)] + (int64_t)pair[2 * k] * D;
            if (j == first)
                sum_first(g, x, gain[k], D);
            else
                sum_more(g, x, gain[k], D);
        }
        update(t, &pes[ut[u]], uptr[u], g);
    }
}

/* Every table lazy and accumulating, several cores: each owned row once,
 * at its first core (the lowest that has it; a lower core's dedup hash says
 * whether it does), its sum that core's with the higher cores' added in
 * ascending order (their dedup hashes find their sums), in place, then its
 * update. The sums and their order are the accumulation hash's, without
 * building one: the cores' own hashes live until the step is applied. */
static void apply_merge_by_dedup(tl_emb_engine *eng, int64_t step, int part, int parts, const tl_emb_step *pes,
                                 emb_apply_ws *ws)
{
    int C = eng->cfg.num_tensor_cores;
    const emb_core_step **cs = ws->slots.p;
    owner own = owner_of(part, parts);
    for (int c = 0; c < C; c++)
        cs[c] = emb_find_slot(&eng->cores[c], step);
    for (int c = 0; c < C; c++) {
        const emb_core_step *s = cs[c];
        const int32_t *ut = s->u_table.p;
        const int64_t *uid = s->u_id.p, *goff = s->u_goff.p;
        const int32_t *uh = eng->cfg.num_hosts > 1 ? s->u_host.p : NULL;
        float *const *uptr = s->u_ptr.p;
        float *g = s->grad.p;
        for (int64_t u = 0; u < s->n_unique; u++) {
            /* only rows this part updates: another part's are being written
             * on its own core */
            if (u + AHEAD < s->n_unique && owned(uid[u + AHEAD], own))
                emb_prefetch_l2(uptr[u + AHEAD], eng->tables[ut[u + AHEAD]].stride);
            if (!owned(uid[u], own) || (uh != NULL && uh[u] != eng->cfg.host))
                continue; /* another part's row, or another host's */
            int32_t t = ut[u];
            bool first = true;
            for (int lo = 0; lo < c && first; lo++)
                first = emb_dedup_find(cs[lo], t, uid[u]) < 0;
            if (!first)
                continue; /* summed and applied with the lower core's */
            int D = eng->tables[t].dim;
            float *gu = g + goff[u];
            for (int hi = c + 1; hi < C; hi++) {
                int32_t v = emb_dedup_find(cs[hi], t, uid[u]);
                if (v >= 0)
                    add_into(gu, (const float *)cs[hi]->grad.p + ((const int64_t *)cs[hi]->u_goff.p)[v], D);
            }
            update(&eng->tables[t], &pes[t], uptr[u], gu);
        }
    }
}

/* Sums every core's gradients per owned row in ascending core order, then
 * runs each table's pipeline once per touched owned row (every owned row
 * for non-lazy tables; with several hosts, the rows this engine holds); tables without accumulation take each core's sum in
 * turn. With one core and only lazy tables the core's sums are the step's
 * and are applied in place. Each row sees the same operations in the same
 * order whatever the parts, so the bits do not depend on them. */
void emb_apply_part(tl_emb_engine *eng, int64_t step, int part, int parts, emb_apply_ws *ws,
                    const float *const *grads)
{
    emb_step_rec *r = &eng->recs[step % EMB_RING];
    int T = eng->cfg.num_tables, C = eng->cfg.num_tensor_cores;
    tl_emb_step *pes = ws->steps.p;
    for (int i = 0; i < T; i++)
        (void)tl_emb_step_prepare(&eng->tables[i].opt, r->lrs, r->n_lr, &pes[i]); /* checked at send */
    if (emb_direct(eng)) {
        TL_ASSERT(parts == 1);
        emb_core_step *s = emb_find_slot(&eng->cores[0], step);
        if (grads != NULL) {
            apply_direct_fused(eng, s, pes, ws, grads);
            return;
        }
        const int32_t *ut = s->u_table.p;
        const int64_t *goff = s->u_goff.p;
        float *const *uptr = s->u_ptr.p;
        float *g = s->grad.p;
        for (int64_t u = 0; u < s->n_unique; u++) {
            if (u + AHEAD < s->n_unique)
                emb_prefetch_l2(uptr[u + AHEAD], eng->tables[ut[u + AHEAD]].stride);
            update(&eng->tables[ut[u]], &pes[ut[u]], uptr[u], g + goff[u]);
        }
        return;
    }
    if (eng->merge_by_dedup) {
        apply_merge_by_dedup(eng, step, part, parts, pes, ws);
        return;
    }
    int32_t *h = ws->h.p, *a_table = ws->at.p;
    int64_t *a_id = ws->aid.p;
    float **ag = ws->ag.p, **a_row = ws->arow.p;
    int32_t na = 0;
    owner own = owner_of(part, parts);
    memset(h, 0xff, ws->hcap * sizeof *h);
    for (int c = 0; c < C; c++) {
        emb_core_step *s = emb_find_slot(&eng->cores[c], step);
        const int32_t *ut = s->u_table.p;
        const int64_t *uid = s->u_id.p, *goff = s->u_goff.p;
        const int32_t *uh = eng->cfg.num_hosts > 1 ? s->u_host.p : NULL;
        float *const *uptr = s->u_ptr.p;
        float *g = s->grad.p;
        for (int64_t u = 0; u < s->n_unique; u++) {
            if (!owned(uid[u], own) || (uh != NULL && uh[u] != eng->cfg.host))
                continue; /* another part's row, or another host's */
            const emb_table *t = &eng->tables[ut[u]];
            float *gu = g + goff[u];
            if (!tl_emb_optimizer_accumulates(&t->opt)) {
                update(t, &pes[ut[u]], uptr[u], gu);
                continue;
            }
            bool added;
            int32_t a = hash_find_or_add(h, ws->hcap, a_table, a_id, ut[u], uid[u], na, &added);
            if (added) {
                /* The sum lives in the row's first core's gradient: only
                 * this part reads that row's sums from now on. */
                a_table[na] = ut[u];
                a_id[na] = uid[u];
                a_row[na] = uptr[u];
                ag[na] = gu;
                na++;
            } else {
                add_into(ag[a], gu, t->dim);
            }
        }
    }
    for (int32_t a = 0; a < na; a++) {
        if (a + AHEAD < na)
            emb_prefetch_l2(a_row[a + AHEAD], eng->tables[a_table[a + AHEAD]].stride);
        const emb_table *t = &eng->tables[a_table[a]];
        if (tl_emb_optimizer_is_lazy(&t->opt))
            update(t, &pes[a_table[a]], a_row[a], ag[a]);
    }
    /* Non-lazy tables: every owned row, g = 0 where nothing arrived. */
    for (int i = 0; i < T; i++) {
        const emb_table *t = &eng->tables[i];
        if (tl_emb_optimizer_is_lazy(&t->opt))
            continue;
        float *zero = ws->zero.p;
        for (int64_t id = part; id < t->vocab; id += parts) {
            float *row = emb_row(eng, t, id);
            if (row == NULL)
                continue; /* another host's */
            int32_t a = hash_get(h, ws->hcap, a_table, a_id, i, id);
            if (a >= 0) {
                update(t, &pes[i], row, ag[a]);
            } else {
                memset(zero, 0, (size_t)t->dim * sizeof *zero); /* the update clips g in place */
                update(t, &pes[i], row, zero);
            }
        }
    }
}

/* Under mu: the step is applied. Frees the cores' slots of the step. */
void emb_apply_finish(tl_emb_engine *eng, int64_t step)
{
    emb_step_rec *r = &eng->recs[step % EMB_RING];
    eng->stats.steps_applied++;
    for (int c = 0; c < eng->cfg.num_tensor_cores; c++) {
        emb_core_step *s = emb_find_slot(&eng->cores[c], step);
        if (s != NULL)
            s->state = CS_FREE;
    }
    eng->applied_through = step;
    r->step = -1;
}

/* Under mu, after emb_apply_reserve(step, 0, 1, ws[0]): the whole update at once. */
void emb_apply_step(tl_emb_engine *eng, int64_t step, const float *const *grads)
{
    emb_apply_part(eng, step, 0, 1, &eng->ws[0], grads);
    emb_apply_finish(eng, step);
}
