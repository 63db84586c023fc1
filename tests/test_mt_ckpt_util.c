/* test_mt_ckpt_util.c — helpers of the model_dir tests (see the header). */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_mt_ckpt_util.h"

/* ---- allocation counter --------------------------------------------------- */

static atomic_long allocations;

static void *count_malloc(size_t size, void *ud)
{
    (void)ud;
    atomic_fetch_add(&allocations, 1);
    return malloc(size);
}

static void *count_realloc(void *p, size_t size, void *ud)
{
    (void)ud;
    atomic_fetch_add(&allocations, 1);
    return realloc(p, size);
}

static void count_free(void *p, void *ud)
{
    (void)ud;
    free(p);
}

void mtck_count_allocations(bool on)
{
    static const tl_allocator counting = {count_malloc, count_realloc, count_free, NULL};
    tl_set_allocator(on ? &counting : NULL);
}

long mtck_allocations(void)
{
    return atomic_load(&allocations);
}

char *mtck_tmpdir(void)
{
    char tmpl[] = "/tmp/tl_mtck.XXXXXX";
    cr_assert_not_null(mkdtemp(tmpl), "mkdtemp");
    return strdup(tmpl);
}

char *mtck_model_dir(char *flag, size_t n)
{
    char *dir = mtck_tmpdir();
    int len = snprintf(flag, n, "--model_dir=%s", dir);
    cr_assert(len > 0 && (size_t)len < n, "--model_dir=%s does not fit %zu bytes", dir, n);
    return dir;
}

void mtck_rmtree(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char *p = mtck_join(dir, e->d_name);
        struct stat sb;
        if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode))
            mtck_rmtree(p);
        else
            unlink(p);
        free(p);
    }
    closedir(d);
    rmdir(dir);
}

void mtck_drop_dir(char *dir)
{
    mtck_rmtree(dir);
    free(dir);
}

char *mtck_join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    cr_assert_not_null(p);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

bool mtck_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

tl_status mtck_model_fn(tl_graph *g, const tl_model_args *a, tl_model_spec *spec, void *user)
{
    const mtck_model *m = user;
    tl_t h = tl_dense(g, a->features, m->hidden, TL_ACT_RELU, "dense");
    h = tl_dropout(g, h, 0.1);
    tl_t logits = tl_dense(g, h, m->classes, TL_ACT_NONE, "dense_1");
    spec->loss = tl_mean(g, tl_softmax_xent(g, logits, a->labels));
    spec->logits = logits;
    return tl_graph_status(g);
}

static tl_labeled_data *synthetic(int64_t n, int64_t features, int classes, uint64_t seed)
{
    tl_synthetic_spec s;
    tl_synthetic_spec_init(&s);
    s.num_examples = n;
    s.num_features = features;
    s.num_classes = classes;
    s.seed = seed;
    tl_labeled_data *d = NULL;
    cr_assert_eq(tl_synthetic_load(&s, &d), TL_OK, "%s", tl_last_error());
    return d;
}

tl_labeled_data *mtck_data(int64_t n, int classes, uint64_t seed)
{
    return synthetic(n, MTCK_FEATURES, classes, seed);
}

tl_labeled_data *mtck_images(int64_t n, int64_t side, int classes, uint64_t seed)
{
    tl_labeled_data *d = synthetic(n, side * side, classes, seed);
    d->feature_rank = 2;
    d->feature_shape[0] = d->feature_shape[1] = side;
    return d;
}

tl_config *mtck_config(int argc, const char *const *argv)
{
    tl_config *cfg;
    cr_assert_eq(tl_config_create(&cfg), TL_OK);
    cr_assert_eq(tl_config_apply_args(cfg, argc, (char *const *)argv, NULL, NULL), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_config_resolve(cfg), TL_OK, "%s", tl_last_error());
    return cfg;
}

static mtck_model default_model = {16, 4};

tl_estimator *mtck_estimator(int argc, const char *const *argv, const tl_estimator_options *o, tl_config **cfg_out)
{
    tl_config *cfg = mtck_config(argc, argv);
    tl_estimator_options def;
    if (o == NULL) {
        tl_estimator_options_init(&def);
        def.model_fn = mtck_model_fn;
        def.user = &default_model;
        def.optimizer.lr.learning_rate = 0.01;
        o = &def;
    }
    tl_estimator *est = NULL;
    cr_assert_eq(tl_estimator_create(cfg, o, &est), TL_OK, "%s", tl_last_error());
    *cfg_out = cfg;
    return est;
}

tl_status mtck_train(int argc, const char *const *argv, const tl_labeled_data *data, tl_train_result *tr,
                     char digest[65])
{
    tl_config *cfg;
    tl_estimator *est = mtck_estimator(argc, argv, NULL, &cfg);
    tl_status st = tl_estimator_train(est, data, tr);
    if (digest != NULL)
        cr_assert_eq(tl_estimator_params_digest(est, digest), TL_OK);
    tl_estimator_destroy(est);
    tl_config_destroy(cfg);
    return st;
}

int mtck_steps(const char *dir, int64_t *out, int max)
{
    int64_t *steps = NULL;
    int n = 0;
    if (tl_ckpt_list(dir, &steps, &n) != TL_OK)
        return 0;
    for (int i = 0; i < n && i < max; i++)
        out[i] = steps[i];
    tl_ckpt_free_steps(steps);
    return n;
}

/* ---- the log catcher ------------------------------------------------------ */

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char log_text[1 << 16];
static size_t log_len;

static void catch_log(tl_log_level level, const char *msg, void *ud)
{
    (void)level;
    (void)ud;
    pthread_mutex_lock(&log_mu);
    int n = snprintf(log_text + log_len, sizeof log_text - log_len, "%s\n", msg);
    if (n > 0)
        log_len = log_len + (size_t)n < sizeof log_text ? log_len + (size_t)n : sizeof log_text - 1;
    pthread_mutex_unlock(&log_mu);
}

void mtck_log_start(void)
{
    pthread_mutex_lock(&log_mu);
    log_len = 0;
    log_text[0] = '\0';
    pthread_mutex_unlock(&log_mu);
    tl_set_log_handler(catch_log, NULL);
    tl_set_log_level(TL_LOG_INFO);
}

void mtck_log_start_at(tl_log_level level)
{
    mtck_log_start();
    tl_set_log_level(level);
}

void mtck_log_stop(void)
{
    tl_set_log_handler(NULL, NULL);
    tl_set_log_level(TL_LOG_WARN);
}

bool mtck_log_has(const char *needle1, const char *needle2)
{
    pthread_mutex_lock(&log_mu);
    bool found = false;
    for (char *line = log_text; !found && *line;) {
        char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[4096];
        snprintf(buf, sizeof buf, "%.*s", (int)len, line);
        found = strstr(buf, needle1) != NULL && (needle2 == NULL || strstr(buf, needle2) != NULL);
        line += len + (end != NULL);
    }
    pthread_mutex_unlock(&log_mu);
    return found;
}

/* ---- event files ---------------------------------------------------------- */

int mtck_scalars(const char *dir, const char *tag, int64_t *steps, float *values, int max)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "event directory %s", dir);
    int count = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strstr(e->d_name, "tfevents") == NULL)
            continue;
        char *p = mtck_join(dir, e->d_name);
        tl_summary_reader *r;
        cr_assert_eq(tl_summary_reader_open(p, &r), TL_OK, "%s", tl_last_error());
        const tl_event *ev;
        tl_status st;
        while ((st = tl_summary_reader_next(r, &ev)) == TL_OK && ev != NULL)
            for (size_t i = 0; i < ev->num_values; i++)
                if (strcmp(ev->values[i].tag, tag) == 0) {
                    if (count < max) {
                        steps[count] = ev->step;
                        values[count] = ev->values[i].simple_value;
                    }
                    count++;
                }
        cr_assert_eq(st, TL_OK, "%s", tl_last_error());
        tl_summary_reader_close(r);
        free(p);
    }
    closedir(d);
    return count;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int mtck_events(const char *dir, mtck_event *out, int max)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "event directory %s", dir);
    char *names[64];
    int nfiles = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strstr(e->d_name, "tfevents") != NULL) {
            cr_assert_lt(nfiles, 64);
            names[nfiles++] = strdup(e->d_name);
        }
    closedir(d);
    qsort(names, (size_t)nfiles, sizeof *names, cmp_names);
    int count = 0;
    for (int f = 0; f < nfiles; f++) {
        char *p = mtck_join(dir, names[f]);
        tl_summary_reader *r;
        cr_assert_eq(tl_summary_reader_open(p, &r), TL_OK, "%s", tl_last_error());
        const tl_event *ev;
        tl_status st;
        while ((st = tl_summary_reader_next(r, &ev)) == TL_OK && ev != NULL) {
            mtck_event x = {.file = f, .step = ev->step};
            bool keep = false;
            if (ev->kind == TL_EVENT_SESSION_LOG) {
                x.status = (int)ev->session_status;
                snprintf(x.path, sizeof x.path, "%s", ev->checkpoint_path);
                keep = true;
            }
            for (size_t i = 0; i < ev->num_values && !keep; i++)
                if (strcmp(ev->values[i].tag, "loss") == 0) {
                    x.loss = ev->values[i].simple_value;
                    keep = true;
                }
            if (keep && count < max)
                out[count] = x;
            count += keep;
        }
        cr_assert_eq(st, TL_OK, "%s", tl_last_error());
        tl_summary_reader_close(r);
        free(p);
        free(names[f]);
    }
    return count;
}

char *mtck_read_replacing(const char *path, const char *mark, const char *with)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s", path);
    char buf[16384];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    cr_assert_lt(n, sizeof buf - 1, "%s is larger than the test expects", path);
    buf[n] = '\0';
    size_t m = strlen(mark), marks = 0, at = 0;
    for (const char *p = strstr(buf, mark); p != NULL; p = strstr(p + m, mark))
        marks++;
    size_t cap = n + marks * strlen(with) + 1;
    char *out = malloc(cap);
    cr_assert_not_null(out);
    for (const char *p = buf; *p != '\0';) {
        if (strncmp(p, mark, m) == 0) {
            at += (size_t)snprintf(out + at, cap - at, "%s", with);
            p += m;
        } else {
            out[at++] = *p++;
        }
    }
    out[at] = '\0';
    return out;
}

void mtck_flip_byte(const char *path, long from_end)
{
    FILE *f = fopen(path, "r+b");
    cr_assert_not_null(f, "open %s", path);
    cr_assert_eq(fseek(f, -from_end, SEEK_END), 0);
    int c = fgetc(f);
    cr_assert_neq(c, EOF);
    cr_assert_eq(fseek(f, -from_end, SEEK_END), 0);
    fputc(c ^ 0x10, f);
    fclose(f);
}

/* ---- embedding engines ---------------------------------------------------- */

void mtck_emb_config1(tl_emb_config *c, const tl_emb_table_config *t, const tl_emb_feature_config *f)
{
    tl_emb_config_default(c);
    c->tables = t;
    c->num_tables = 1;
    c->features = f;
    c->num_features = 1;
}

tl_emb_engine *mtck_emb_engine(const tl_emb_config *c)
{
    tl_emb_engine *eng = NULL;
    cr_assert_eq(tl_emb_engine_create(c, &eng), TL_OK, "%s", tl_last_error());
    return eng;
}
