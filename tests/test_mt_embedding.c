/* The engine with each core on its own thread, as the device workers call
 * it: the same table bits as the same steps driven from one thread, and
 * clean under ThreadSanitizer. Written for the TSan stand-in too. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tpuloop/embedding.h"

#define CORES 4
#define STEPS 6
#define BATCH 8
#define VOCAB 50
#define DIM 4

typedef struct ctx {
    tl_emb_engine *eng;
    pthread_barrier_t *bar;
    int core;
    int failures;
} ctx;

static void inputs(int core, int step, int64_t *ids, int64_t *splits, float *grad)
{
    unsigned x = (unsigned)(core * 7919 + step * 104729 + 1);
    int64_t n = 0;
    splits[0] = 0;
    for (int b = 0; b < BATCH; b++) {
        int len = (int)((x = x * 1103515245u + 12345u) >> 16) % 3;
        for (int k = 0; k < len; k++)
            ids[n++] = ((x = x * 1103515245u + 12345u) >> 16) % (VOCAB / 5); /* many duplicates across cores */
        splits[b + 1] = n;
    }
    for (int k = 0; k < BATCH * DIM; k++)
        grad[k] = (float)((int)((x = x * 1103515245u + 12345u) >> 16) % 100) / 100.0f - 0.5f;
}

/* One core's step; returns the number of failed calls. */
static int core_step(tl_emb_engine *eng, int core, int step)
{
    int64_t ids[BATCH * 2], splits[BATCH + 1];
    float grad[BATCH * DIM], out[BATCH * DIM];
    inputs(core, step, ids, splits, grad);
    tl_emb_input in = {.kind = TL_EMB_INPUT_RAGGED, .ids = ids, .n = splits[BATCH], .row_splits = splits};
    float *outs[1] = {out};
    const float *gs[1] = {grad};
    tl_emb_dedup dd;
    int bad = 0;
    bad += tl_emb_enqueue(eng, core, &in, 1, NULL) != TL_OK;
    bad += tl_emb_recv_dedup(eng, core, &dd) != TL_OK;
    bad += tl_emb_recv_activations(eng, core, &dd, outs, 1) != TL_OK;
    bad += tl_emb_send_gradients(eng, core, &dd, gs, 1, NULL, 0) != TL_OK;
    return bad;
}

static void *worker(void *arg)
{
    ctx *c = arg;
    for (int s = 0; s < STEPS; s++) {
        c->failures += core_step(c->eng, c->core, s);
        pthread_barrier_wait(c->bar); /* the device loop's step boundary */
    }
    return NULL;
}

/* Adagrad, or (adam) non-lazy Adam, which updates every row each step. */
static tl_emb_engine *make_opt(bool pipelined, bool adam)
{
    static tl_emb_optimizer opt;
    tl_emb_optimizer_default(adam ? TL_EMB_ADAM : TL_EMB_ADAGRAD, &opt);
    opt.learning_rate = 0.1f;
    opt.use_non_lazy = adam;
    static tl_emb_table_config t;
    t = (tl_emb_table_config){.name = "t", .vocabulary_size = VOCAB, .dim = DIM, .optimizer = &opt,
                              .combiner = TL_EMB_COMBINER_SUM};
    static tl_emb_feature_config f;
    f = (tl_emb_feature_config){.name = "f", .table = 0};
    tl_emb_config c;
    tl_emb_config_default(&c);
    c.tables = &t;
    c.num_tables = 1;
    c.features = &f;
    c.num_features = 1;
    c.num_tensor_cores = CORES;
    c.batch_size_per_tensor_core = BATCH;
    c.num_shards = 3;
    c.pipeline_execution_with_tensor_core = pipelined;
    tl_emb_engine *eng = NULL;
    cr_assert_eq(tl_emb_engine_create(&c, &eng), TL_OK);
    return eng;
}

static tl_emb_engine *make(bool pipelined)
{
    return make_opt(pipelined, false);
}

/* The parameters, and the slots after them. */
static void table(tl_emb_engine *eng, float *w)
{
    float slots[2][VOCAB * DIM];
    float *st[3] = {w, slots[0], slots[1]};
    int n = 1 + tl_emb_num_slots(tl_emb_engine_config(eng)->tables[0].optimizer);
    cr_assert_eq(tl_emb_retrieve(eng, 0, NULL, 1, 0, st, n, VOCAB), TL_OK);
}

Test(mt_embedding, threads_give_the_single_thread_bits)
{
    for (int pipelined = 0; pipelined < 2; pipelined++) {
        tl_emb_engine *ref = make(pipelined);
        for (int s = 0; s < STEPS; s++)
            for (int core = 0; core < CORES; core++)
                cr_assert_eq(core_step(ref, core, s), 0);
        float want[VOCAB * DIM], got[VOCAB * DIM];
        table(ref, want);
        tl_emb_engine_destroy(ref);

        tl_emb_engine *eng = make(pipelined);
        pthread_barrier_t bar;
        cr_assert_eq(pthread_barrier_init(&bar, NULL, CORES), 0);
        pthread_t th[CORES];
        ctx cs[CORES];
        for (int i = 0; i < CORES; i++) {
            cs[i] = (ctx){eng, &bar, i, 0};
            cr_assert_eq(pthread_create(&th[i], NULL, worker, &cs[i]), 0);
        }
        for (int i = 0; i < CORES; i++) {
            pthread_join(th[i], NULL);
            cr_assert_eq(cs[i].failures, 0, "core %d", i);
        }
        pthread_barrier_destroy(&bar);
        table(eng, got);
        tl_emb_engine_destroy(eng);
        cr_assert(memcmp(got, want, sizeof want) == 0, "pipelined %d: threads changed the bits", pipelined);
    }
}

/* Owner apply: after every core's send, each core on its own thread
 * updates the rows it owns; the tables have the serial apply's bits. */
static void *owner_worker(void *arg)
{
    ctx *c = arg;
    for (int s = 0; s < STEPS; s++) {
        c->failures += core_step(c->eng, c->core, s);
        pthread_barrier_wait(c->bar); /* every core has sent */
        c->failures += tl_emb_apply_owned(c->eng, c->core) != TL_OK;
        pthread_barrier_wait(c->bar); /* every row is updated */
    }
    return NULL;
}

static void owner_apply(bool adam)
{
    tl_emb_engine *ref = make_opt(false, adam);
    for (int s = 0; s < STEPS; s++)
        for (int core = 0; core < CORES; core++)
            cr_assert_eq(core_step(ref, core, s), 0);
    float want[VOCAB * DIM], got[VOCAB * DIM];
    table(ref, want);
    tl_emb_engine_destroy(ref);

    tl_emb_engine *eng = make(false);
    cr_assert_eq(tl_emb_apply_owned(eng, 0), TL_ERUNTIME, "not in owner apply");
    cr_assert_eq(tl_emb_set_owner_apply(eng, true), TL_OK);
    /* before every core sent: an error, not a wait */
    cr_assert_eq(core_step(eng, 0, 0), 0);
    cr_assert_eq(tl_emb_apply_owned(eng, 0), TL_ERUNTIME);
    cr_assert(strstr(tl_last_error(), "not every core has sent step 0 (1 of 4 cores sent)") != NULL, "%s",
              tl_last_error());
    cr_assert_eq(tl_emb_set_owner_apply(eng, false), TL_ERUNTIME, "a step is in flight");
    tl_emb_engine_destroy(eng);

    eng = make_opt(false, adam);
    cr_assert_eq(tl_emb_set_owner_apply(eng, true), TL_OK);
    pthread_barrier_t bar;
    cr_assert_eq(pthread_barrier_init(&bar, NULL, CORES), 0);
    pthread_t th[CORES];
    ctx cs[CORES];
    for (int i = 0; i < CORES; i++) {
        cs[i] = (ctx){eng, &bar, i, 0};
        cr_assert_eq(pthread_create(&th[i], NULL, owner_worker, &cs[i]), 0);
    }
    for (int i = 0; i < CORES; i++) {
        pthread_join(th[i], NULL);
        cr_assert_eq(cs[i].failures, 0, "core %d", i);
    }
    pthread_barrier_destroy(&bar);
    cr_assert_eq(tl_emb_apply_owned(eng, 1), TL_ERUNTIME, "a second apply of the same step");
    tl_emb_stats st;
    tl_emb_get_stats(eng, &st);
    cr_assert_eq(st.steps_applied, STEPS);
    table(eng, got);
    tl_emb_engine_destroy(eng);
    cr_assert(memcmp(got, want, sizeof want) == 0, "adam %d: owner apply changed the bits", adam);
}

Test(mt_embedding, owner_apply_gives_the_serial_bits)
{
    owner_apply(false);
    owner_apply(true); /* non-lazy: every row, split by owner */
}
