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

static tl_emb_engine *make(bool pipelined)
{
    static tl_emb_optimizer opt;
    tl_emb_optimizer_default(TL_EMB_ADAGRAD, &opt);
    opt.learning_rate = 0.1f;
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

static void table(tl_emb_engine *eng, float *w)
{
    float acc[VOCAB * DIM];
    float *st[2] = {w, acc};
    cr_assert_eq(tl_emb_retrieve(eng, 0, NULL, 1, 0, st, 2, VOCAB), TL_OK);
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
