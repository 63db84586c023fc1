/* The synthetic Criteo generator: config checks, determinism in any order,
 * the Zipf shape of the ids, the calibrated click rate, the oracle AUC of the
 * default config, tl_auc on hand-made cases, the in-memory load (dense
 * features, int64 ids) and a TSV round trip through tpuloop's own Criteo
 * reader (one int64 tensor per categorical column, C1 .. C26). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tpuloop/criteo_synth.h"
#include "tpuloop/dataset.h"

#define OK(call)                                                                                   \
    do {                                                                                           \
        tl_status st_ = (call);                                                                    \
        cr_assert_eq(st_, TL_OK, "%s failed: %s: %s", #call, tl_err_name(st_), tl_last_error()); \
    } while (0)

#define ERR(call, status, frag)                                                                    \
    do {                                                                                           \
        tl_status st_ = (call);                                                                    \
        cr_assert_eq(st_, (status), "%s: got %s (%s)", #call, tl_err_name(st_), tl_last_error());  \
        cr_assert(strstr(tl_last_error(), (frag)) != NULL, "message \"%s\" lacks \"%s\"",          \
                  tl_last_error(), (frag));                                                        \
    } while (0)

static tl_criteo_synth *make(const tl_criteo_synth_config *c)
{
    tl_criteo_synth *g = NULL;
    OK(tl_criteo_synth_create(c, &g));
    return g;
}

static tl_criteo_synth *make_default(uint64_t seed)
{
    tl_criteo_synth_config c;
    tl_criteo_synth_config_default(&c);
    c.seed = seed;
    return make(&c);
}

static void config_fails(tl_criteo_synth_config c, const char *frag)
{
    tl_criteo_synth *g = (tl_criteo_synth *)&g;
    ERR(tl_criteo_synth_create(&c, &g), TL_EINVAL, frag);
    cr_assert_null(g);
}

Test(criteo_synth, config_defaults_and_errors)
{
    tl_criteo_synth_config d;
    tl_criteo_synth_config_default(&d);
    cr_assert_eq(d.num_dense, 13);
    cr_assert_eq(d.num_categorical, 26);
    cr_assert_eq(d.hidden_dim, 4);
    cr_assert_eq(d.zipf_exponent, 1.05);
    cr_assert_eq(d.ctr, 0.25);
    cr_assert_eq(d.vocab_sizes[2], 100000);
    cr_assert_eq(d.vocab_sizes[8], 3);
    tl_criteo_synth_config c = d;
    c.num_examples = -1;
    config_fails(c, "tl_criteo_synth_config.num_examples: must be >= 0 (got -1)");
    c = d, c.num_dense = 14;
    config_fails(c, "num_dense: must be in 0..13 (got 14)");
    c = d, c.num_categorical = -1;
    config_fails(c, "num_categorical: must be in 0..26 (got -1)");
    c = d, c.num_dense = 0, c.num_categorical = 0;
    config_fails(c, "at least one feature is needed");
    c = d, c.vocab_sizes[4] = 0;
    config_fails(c, "vocab_sizes[4] (C5): must be in 1..4294967296 (got 0)");
    c = d, c.vocab_sizes[25] = ((int64_t)1 << 32) + 1;
    config_fails(c, "vocab_sizes[25] (C26): must be in 1..4294967296 (got 4294967297)");
    c = d, c.num_categorical = 3, c.vocab_sizes[25] = 0; /* unused columns are not checked */
    tl_criteo_synth_destroy(make(&c));
    c = d, c.zipf_exponent = -0.5;
    config_fails(c, "zipf_exponent: must be in [0, 10] (got -0.5)");
    c = d, c.zipf_exponent = NAN;
    config_fails(c, "zipf_exponent: must be in [0, 10] (got nan)");
    c = d, c.hidden_dim = 0;
    config_fails(c, "hidden_dim: must be in 1..64 (got 0)");
    c = d, c.ctr = 1.0;
    config_fails(c, "ctr: must be in [0.001, 0.999] (got 1)");
    c = d, c.signal = 21;
    config_fails(c, "signal: must be in [0, 20] (got 21)");
    tl_criteo_synth *g;
    ERR(tl_criteo_synth_create(NULL, &g), TL_EINVAL, "config is NULL");
    ERR(tl_criteo_synth_create(&d, NULL), TL_EINVAL, "out is NULL");
    tl_criteo_synth_destroy(NULL);
}

Test(criteo_synth, range_errors)
{
    tl_criteo_synth_config c;
    tl_criteo_synth_config_default(&c);
    c.num_examples = 100;
    tl_criteo_synth *g = make(&c);
    int32_t y;
    ERR(tl_criteo_synth_example(g, 100, NULL, NULL, &y, NULL), TL_EINVAL,
        "index must be in [0, num_examples = 100) (got 100)");
    ERR(tl_criteo_synth_example(g, -1, NULL, NULL, &y, NULL), TL_EINVAL, "(got -1)");
    ERR(tl_criteo_synth_example(NULL, 0, NULL, NULL, &y, NULL), TL_EINVAL, "NULL");
    ERR(tl_criteo_synth_generate(g, 90, 11, NULL, NULL, NULL, NULL), TL_EINVAL,
        "examples [90, 90 + 11) are not within [0, num_examples = 100)");
    ERR(tl_criteo_synth_generate(g, 0, -1, NULL, NULL, NULL, NULL), TL_EINVAL, "not within");
    OK(tl_criteo_synth_generate(g, 100, 0, NULL, NULL, NULL, NULL));
    double auc = 0;
    ERR(tl_criteo_synth_oracle_auc(g, 0, 101, &auc), TL_EINVAL, "not within");
    cr_assert(isnan(auc));
    ERR(tl_criteo_synth_oracle_auc(g, 0, 1, &auc), TL_EINVAL, "without both classes");
    ERR(tl_criteo_synth_write_tsv(g, NULL, 0, 1), TL_EINVAL, "path is NULL");
    ERR(tl_criteo_synth_write_tsv(g, "/nonexistent-dir/x.tsv", 0, 1), TL_EIO, "/nonexistent-dir/x.tsv: cannot create");
    tl_criteo_synth_destroy(g);
    c.num_dense = 3;
    g = make(&c);
    ERR(tl_criteo_synth_write_tsv(g, "/tmp/unused.tsv", 0, 1), TL_EINVAL, "num_dense 3 and num_categorical 26");
    tl_criteo_synth_destroy(g);
}

#define DN 500

Test(criteo_synth, same_seed_same_bits_in_any_order)
{
    tl_criteo_synth *a = make_default(11), *b = make_default(11), *o = make_default(12);
    cr_assert_eq(tl_criteo_synth_bias(a), tl_criteo_synth_bias(b));
    static float da[DN * 13], db[DN * 13];
    static int64_t ia[DN * 26], ib[DN * 26], io[DN * 26];
    static int32_t ya[DN], yb[DN];
    static double pa[DN], pb[DN];
    OK(tl_criteo_synth_generate(a, 0, DN, da, ia, ya, pa));
    /* b: one at a time, backwards, in two interleaved passes */
    for (int pass = 0; pass < 2; pass++)
        for (int i = DN - 1 - pass; i >= 0; i -= 2)
            OK(tl_criteo_synth_example(b, i, db + i * 13, ib + i * 26, yb + i, pb + i));
    cr_assert(memcmp(da, db, sizeof da) == 0);
    cr_assert(memcmp(ia, ib, sizeof ia) == 0);
    cr_assert(memcmp(ya, yb, sizeof ya) == 0);
    cr_assert(memcmp(pa, pb, sizeof pa) == 0);
    /* a slice equals the same rows of the whole */
    OK(tl_criteo_synth_generate(b, 123, 7, db, ib, yb, pb));
    cr_assert(memcmp(db, da + 123 * 13, 7 * 13 * sizeof(float)) == 0);
    cr_assert(memcmp(ib, ia + 123 * 26, 7 * 26 * sizeof(int64_t)) == 0);
    cr_assert(memcmp(pb, pa + 123, 7 * sizeof(double)) == 0);
    /* another seed: other ids (the 3-value columns may agree by chance) */
    OK(tl_criteo_synth_generate(o, 0, DN, NULL, io, NULL, NULL));
    int same = 0;
    for (int i = 0; i < DN * 26; i++)
        same += ia[i] == io[i];
    cr_assert_lt(same, DN * 26 / 4, "%d of %d ids agree across seeds", same, DN * 26);
    /* the values look like Criteo's: non-negative integers, ids in range */
    const tl_criteo_synth_config *c = tl_criteo_synth_get_config(a);
    int zeros = 0;
    for (int i = 0; i < DN; i++) {
        for (int j = 0; j < 13; j++) {
            float x = da[i * 13 + j];
            cr_assert(x >= 0 && x == floorf(x) && x < 16777216.0f);
            zeros += x == 0;
        }
        for (int k = 0; k < 26; k++)
            cr_assert(ia[i * 26 + k] >= 0 && ia[i * 26 + k] < c->vocab_sizes[k]);
        cr_assert(pa[i] > 0 && pa[i] < 1 && (ya[i] == 0 || ya[i] == 1));
    }
    cr_assert(zeros > DN && zeros < DN * 13 / 2, "%d zeros", zeros); /* some, not most */
    tl_criteo_synth_destroy(a);
    tl_criteo_synth_destroy(b);
    tl_criteo_synth_destroy(o);
}

static int cmp_desc(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a < b) - (a > b);
}

/* One column, V = 100000, s = 1.05, 200000 draws: the top id's frequency and
 * the top 10's mass match P(r) = (r + 1)^-s / H(V, s). */
Test(criteo_synth, zipf_shape)
{
    enum { N = 200000, V = 100000 };
    tl_criteo_synth_config c;
    tl_criteo_synth_config_default(&c);
    c.num_dense = 0;
    c.num_categorical = 1;
    c.vocab_sizes[0] = V;
    tl_criteo_synth *g = make(&c);
    int64_t *ids = malloc(N * sizeof *ids), *count = calloc(V, sizeof *count);
    cr_assert(ids != NULL && count != NULL);
    OK(tl_criteo_synth_generate(g, 0, N, NULL, ids, NULL, NULL));
    for (int i = 0; i < N; i++)
        count[ids[i]]++;
    /* the hottest id is not id 0: ranks are scattered */
    int64_t hot = 0;
    for (int64_t v = 1; v < V; v++)
        if (count[v] > count[hot])
            hot = v;
    cr_assert_neq(hot, 0);
    qsort(count, V, sizeof *count, cmp_desc);
    double h = 0, h10 = 0;
    for (int r = V; r >= 1; r--) {
        h += pow(r, -1.05);
        if (r <= 10)
            h10 += pow(r, -1.05);
    }
    double top = (double)count[0] / N, want_top = 1.0 / h;
    cr_assert(fabs(top - want_top) < 0.03 * want_top, "top id %.4f, Zipf %.4f", top, want_top);
    double m10 = 0;
    for (int r = 0; r < 10; r++)
        m10 += (double)count[r] / N;
    cr_assert(fabs(m10 - h10 / h) < 0.01, "top-10 mass %.4f, Zipf %.4f", m10, h10 / h);
    free(ids);
    free(count);
    tl_criteo_synth_destroy(g);
}

/* The default config over 200000 examples: mean label within 0.01 of ctr,
 * and the oracle AUC near 0.79 (0.786..0.795 measured over seeds 0..6). */
Test(criteo_synth, default_click_rate_and_oracle_auc)
{
    enum { N = 200000 };
    tl_criteo_synth *g = make_default(0);
    int32_t *y = malloc(N * sizeof *y);
    double *p = malloc(N * sizeof *p);
    cr_assert(y != NULL && p != NULL);
    OK(tl_criteo_synth_generate(g, 0, N, NULL, NULL, y, p));
    double my = 0, mp = 0;
    for (int i = 0; i < N; i++) {
        my += y[i];
        mp += p[i];
    }
    cr_assert(fabs(my / N - 0.25) < 0.01, "mean label %.4f", my / N);
    cr_assert(fabs(mp / N - 0.25) < 0.01, "mean probability %.4f", mp / N);
    double auc = tl_auc(p, y, N);
    cr_assert(auc > 0.77 && auc < 0.81, "oracle AUC %.4f", auc);
    /* tl_criteo_synth_oracle_auc is the same number on a slice */
    double o;
    OK(tl_criteo_synth_oracle_auc(g, 1000, 5000, &o));
    cr_assert_eq(o, tl_auc(p + 1000, y + 1000, 5000));
    free(y);
    free(p);
    tl_criteo_synth_destroy(g);
}

Test(criteo_synth, signal_and_ctr_move_what_they_should)
{
    tl_criteo_synth_config c;
    tl_criteo_synth_config_default(&c);
    c.signal = 0; /* every probability is the ctr: nothing to rank */
    c.ctr = 0.1;
    tl_criteo_synth *g = make(&c);
    double p, auc;
    OK(tl_criteo_synth_example(g, 5, NULL, NULL, NULL, &p));
    cr_assert(fabs(p - 0.1) < 1e-9, "p %.6f", p);
    OK(tl_criteo_synth_oracle_auc(g, 0, 2000, &auc));
    cr_assert_eq(auc, 0.5);
    tl_criteo_synth_destroy(g);
    c.signal = 4;
    g = make(&c);
    OK(tl_criteo_synth_oracle_auc(g, 0, 20000, &auc));
    cr_assert_gt(auc, 0.9);
    tl_criteo_synth_destroy(g);
}

Test(criteo_synth, auc_hand_made)
{
    double s1[] = {0.1, 0.4, 0.35, 0.8};
    int32_t y1[] = {0, 0, 1, 1};
    cr_assert(fabs(tl_auc(s1, y1, 4) - 0.75) < 1e-15); /* sklearn's example */
    double perfect[] = {0.1, 0.2, 0.7, 0.9};
    cr_assert_eq(tl_auc(perfect, y1, 4), 1.0);
    double reversed[] = {0.9, 0.7, 0.2, 0.1};
    cr_assert_eq(tl_auc(reversed, y1, 4), 0.0);
    double flat[] = {3, 3, 3, 3};
    cr_assert_eq(tl_auc(flat, y1, 4), 0.5);
    /* a positive tied with one negative and above the other: (1 + 0.5) / 2 */
    double tie[] = {0.2, 0.5, 0.5};
    int32_t yt[] = {0, 0, 1};
    cr_assert_eq(tl_auc(tie, yt, 3), 0.75);
    int32_t y7[] = {0, 7, 1, 1}; /* any label other than 1 is negative */
    cr_assert(fabs(tl_auc(s1, y7, 4) - 0.75) < 1e-15);
    int32_t none[] = {0, 0, 0, 0};
    cr_assert(isnan(tl_auc(s1, none, 4)));
    cr_assert(strstr(tl_last_error(), "0 positives, 4 negatives") != NULL, "%s", tl_last_error());
    cr_assert(isnan(tl_auc(s1, y1, 0)));
    double nan_s[] = {0.1, NAN, 0.3, 0.4};
    cr_assert(isnan(tl_auc(nan_s, y1, 4)));
    cr_assert(strstr(tl_last_error(), "score[1] is NaN") != NULL, "%s", tl_last_error());
    cr_assert(isnan(tl_auc(NULL, y1, 4)));
    cr_assert_eq(tl_last_status(), TL_EINVAL);
}

/* Written TSV read back by tl_dataset_criteo: labels, logf(x + 1) of the
 * dense integers and the ids, exactly; with the reader's vocab_sizes unset
 * and equal to the generator's. */
Test(criteo_synth, tsv_round_trip_through_the_criteo_reader)
{
    enum { FIRST = 40, N = 300 };
    tl_criteo_synth *g = make_default(3);
    const tl_criteo_synth_config *c = tl_criteo_synth_get_config(g);
    char path[64];
    snprintf(path, sizeof path, "/tmp/tl_criteo_synth_%ld.tsv", (long)getpid());
    OK(tl_criteo_synth_write_tsv(g, path, FIRST, N));
    static float dense[N * 13];
    static int64_t ids[N * 26];
    static int32_t labels[N];
    OK(tl_criteo_synth_generate(g, FIRST, N, dense, ids, labels, NULL));
    for (int mode = 0; mode < 2; mode++) {
        tl_criteo_options o;
        tl_criteo_options_init(&o);
        if (mode == 1)
            memcpy(o.vocab_sizes, c->vocab_sizes, sizeof o.vocab_sizes);
        const char *pats[] = {path};
        tl_dataset *ds;
        OK(tl_dataset_criteo(pats, 1, &o, &ds));
        const tl_element *e;
        int i = 0;
        while (tl_dataset_next(ds, &e) == TL_OK && e != NULL) {
            cr_assert_lt(i, N);
            const tl_tensor *tl = tl_element_find(e, "label"), *td = tl_element_find(e, "dense");
            cr_assert(tl != NULL && td != NULL);
            cr_assert_eq(*(const int32_t *)tl->data, labels[i], "row %d label", i);
            for (int j = 0; j < 13; j++)
                cr_assert_eq(((const float *)td->data)[j], logf(dense[i * 13 + j] + 1.0f), "row %d I%d", i, j + 1);
            for (int k = 0; k < 26; k++) { /* each column under its own name, an int64 scalar */
                char key[24];
                snprintf(key, sizeof key, "C%d", k + 1);
                const tl_tensor *tc = tl_element_find(e, key);
                cr_assert(tc != NULL && tc->dtype == TL_DT_INT64 && tc->rank == 0, "row %d %s", i, key);
                cr_assert_eq(*(const int64_t *)tc->data, ids[i * 26 + k], "row %d C%d", i, k + 1);
            }
            i++;
        }
        cr_assert_eq(i, N, "%s", tl_last_error());
        tl_dataset_destroy(ds);
    }
    unlink(path);
    tl_criteo_synth_destroy(g);
}

/* tl_criteo_synth_load: the features are the 13 dense log(1 + x) values
 * only, the 26 ids travel as int64 beside them — any vocabulary, so a
 * column of 2^26 rows gives ids above 2^24 exactly (a float would round
 * the odd ones). */
Test(criteo_synth, load_gives_dense_features_and_int64_ids)
{
    enum { FIRST = 7, N = 400 };
    tl_criteo_synth_config c;
    tl_criteo_synth_config_default(&c);
    c.seed = 5;
    c.num_examples = FIRST + N;
    c.vocab_sizes[2] = (int64_t)1 << 26;
    c.zipf_exponent = 0.5; /* flat enough that most ids are large */
    tl_criteo_synth *g = make(&c);
    static float dense[N * 13];
    static int64_t ids[N * 26];
    static int32_t labels[N];
    OK(tl_criteo_synth_generate(g, FIRST, N, dense, ids, labels, NULL));
    tl_labeled_data *d = NULL;
    OK(tl_criteo_synth_load(g, FIRST, N, &d));
    cr_assert_eq(d->num_examples, N);
    cr_assert_eq(d->num_features, 13);
    cr_assert(d->feature_rank == 1 && d->feature_shape[0] == 13);
    cr_assert_eq(d->num_classes, 2);
    cr_assert_eq(d->num_ids, 26);
    cr_assert_not_null(d->ids);
    cr_assert(memcmp(d->ids, ids, sizeof ids) == 0, "the ids are the generator's, as int64");
    cr_assert(memcmp(d->labels, labels, sizeof labels) == 0);
    for (int i = 0; i < N * 13; i++)
        cr_assert_eq(d->features[i], logf(dense[i] + 1.0f), "value %d", i);
    int odd_big = 0;
    for (int i = 0; i < N; i++)
        odd_big += ids[i * 26 + 2] > ((int64_t)1 << 24) && ids[i * 26 + 2] % 2 == 1;
    cr_assert_gt(odd_big, 10, "C3 has %d odd ids above 2^24", odd_big);
    tl_labeled_data_destroy(d);
    tl_criteo_synth_destroy(g);
}

/* An allocator whose Nth allocation (and later ones) fail. */
static int alloc_left;
static void *fail_malloc(size_t n, void *ud)
{
    (void)ud;
    return alloc_left-- > 0 ? malloc(n) : NULL;
}
static void *fail_realloc(void *p, size_t n, void *ud)
{
    (void)ud;
    return alloc_left-- > 0 ? realloc(p, n) : NULL;
}
static void plain_free(void *p, void *ud)
{
    (void)ud;
    free(p);
}

Test(criteo_synth, out_of_memory_unwinds)
{
    tl_allocator a = {fail_malloc, fail_realloc, plain_free, NULL};
    tl_set_allocator(&a);
    tl_criteo_synth_config c;
    tl_criteo_synth_config_default(&c);
    c.num_dense = 1;
    c.num_categorical = 2;
    for (int k = 0; k < 2; k++) {
        alloc_left = k;
        tl_criteo_synth *g = (tl_criteo_synth *)&g;
        ERR(tl_criteo_synth_create(&c, &g), TL_ENOMEM, "");
        cr_assert_null(g);
    }
    alloc_left = 1000;
    tl_criteo_synth *g = make(&c);
    double auc;
    for (int k = 0; k < 3; k++) {
        alloc_left = k;
        ERR(tl_criteo_synth_oracle_auc(g, 0, 100, &auc), TL_ENOMEM, "");
        cr_assert(isnan(auc));
    }
    alloc_left = 1000;
    OK(tl_criteo_synth_oracle_auc(g, 0, 100, &auc));
    tl_criteo_synth_destroy(g);
    tl_set_allocator(NULL);
}
