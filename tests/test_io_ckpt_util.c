/* test_io_ckpt_util.c — the helpers of test_io_ckpt_util.h; no tests. */
#include "test_io_ckpt_util.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *ck_tmpdir(void)
{
    char *t = strdup("/tmp/tpuloop-ckpt-XXXXXX");
    cr_assert_not_null(t);
    cr_assert_not_null(mkdtemp(t), "mkdtemp failed");
    return t;
}

char *ck_join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    cr_assert_not_null(p);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

void ck_rmtree(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char *p = ck_join(dir, de->d_name);
        unlink(p);
        free(p);
    }
    closedir(d);
    rmdir(dir);
}

unsigned char *ck_read(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)n + 1);
    cr_assert_not_null(buf);
    cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

void ck_write(const char *path, const void *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "cannot create %s", path);
    cr_assert_eq(fwrite(buf, 1, len, f), len);
    cr_assert_eq(fclose(f), 0);
}

int ck_count_temps(const char *dir)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        n += strstr(de->d_name, ".tmp-") != NULL;
    closedir(d);
    return n;
}

void ck_sample_fill(ck_sample *s, int seed)
{
    memset(s, 0, sizeof *s);
    for (int i = 0; i < 20; i++)
        s->kernel[i] = (float)(seed + 1) * 0.25f * (float)(i - 7);
    for (int i = 0; i < 3; i++)
        s->bias[i] = 1.0 / (double)(3 + i + seed);
    s->step = 1000 + seed;
    for (int i = 0; i < 7; i++)
        s->mask[i] = (uint8_t)(i * 37 + seed);
}

tl_ckpt_writer *ck_sample_writer(const ck_sample *s)
{
    tl_ckpt_writer *w;
    cr_assert_eq(tl_ckpt_writer_create(&w), TL_OK);
    cr_assert_eq(tl_ckpt_writer_add(w, "dense/kernel", TL_CKPT_F32, (int64_t[]){4, 5}, 2, s->kernel), TL_OK);
    cr_assert_eq(tl_ckpt_writer_add(w, "dense/bias", TL_CKPT_F64, (int64_t[]){3}, 1, s->bias), TL_OK);
    cr_assert_eq(tl_ckpt_writer_add(w, "global_step", TL_CKPT_I64, NULL, 0, &s->step), TL_OK);
    cr_assert_eq(tl_ckpt_writer_add(w, "mask", TL_CKPT_U8, (int64_t[]){7}, 1, s->mask), TL_OK);
    cr_assert_eq(tl_ckpt_writer_add(w, "empty", TL_CKPT_I32, (int64_t[]){0, 3}, 2, NULL), TL_OK);
    cr_assert_eq(tl_ckpt_writer_set_meta(w, "model", "sample"), TL_OK);
    char buf[16];
    snprintf(buf, sizeof buf, "%lld", (long long)s->step);
    cr_assert_eq(tl_ckpt_writer_set_meta(w, "global_step", buf), TL_OK);
    return w;
}

void ck_sample_write(const char *path, int seed)
{
    ck_sample s;
    ck_sample_fill(&s, seed);
    tl_ckpt_writer *w = ck_sample_writer(&s);
    tl_status st = tl_ckpt_writer_write(w, path);
    cr_assert_eq(st, TL_OK, "writing %s: %s", path, tl_last_error());
    tl_ckpt_writer_destroy(w);
}

void ck_sample_check(const tl_ckpt_reader *r, int seed)
{
    ck_sample s;
    ck_sample_fill(&s, seed);
    cr_assert_eq(tl_ckpt_num_tensors(r), 5);
    struct {
        const char *name;
        tl_ckpt_dtype dt;
        int rank;
        int64_t shape[2];
        const void *data;
        uint64_t bytes;
    } want[] = {
        {"dense/kernel", TL_CKPT_F32, 2, {4, 5}, s.kernel, sizeof s.kernel},
        {"dense/bias", TL_CKPT_F64, 1, {3, 0}, s.bias, sizeof s.bias},
        {"global_step", TL_CKPT_I64, 0, {0, 0}, &s.step, sizeof s.step},
        {"mask", TL_CKPT_U8, 1, {7, 0}, s.mask, sizeof s.mask},
        {"empty", TL_CKPT_I32, 2, {0, 3}, NULL, 0},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        tl_ckpt_tensor_info t;
        cr_assert_eq(tl_ckpt_find(r, want[i].name, &t), TL_OK, "%s: %s", want[i].name, tl_last_error());
        cr_assert_str_eq(t.name, want[i].name);
        cr_assert_eq(t.dtype, want[i].dt, "%s dtype", want[i].name);
        cr_assert_eq(t.rank, want[i].rank, "%s rank", want[i].name);
        for (int d = 0; d < t.rank; d++)
            cr_assert_eq(t.shape[d], want[i].shape[d], "%s shape[%d]", want[i].name, d);
        cr_assert_eq(t.bytes, want[i].bytes, "%s bytes", want[i].name);
        if (want[i].bytes)
            cr_assert_eq(memcmp(t.data, want[i].data, want[i].bytes), 0, "%s data", want[i].name);
        else
            cr_assert_null(t.data);
    }
    cr_assert_str_eq(tl_ckpt_meta(r, "model"), "sample");
}

static char log_buf[16384];
static size_t log_len;
static tl_log_level log_min = TL_LOG_WARN;

static void log_catch(tl_log_level level, const char *msg, void *ud)
{
    (void)ud;
    if (level < log_min)
        return;
    int n = snprintf(log_buf + log_len, sizeof log_buf - log_len, "%s\n", msg);
    if (n > 0)
        log_len += (size_t)n < sizeof log_buf - log_len ? (size_t)n : sizeof log_buf - log_len - 1;
}

void ck_log_start(void)
{
    log_len = 0;
    log_buf[0] = '\0';
    log_min = TL_LOG_WARN;
    tl_set_log_handler(log_catch, NULL);
}

void ck_log_start_info(void)
{
    ck_log_start();
    log_min = TL_LOG_INFO;
    tl_set_log_level(TL_LOG_INFO);
}

const char *ck_log_text(void)
{
    return log_buf;
}

void ck_log_stop(void)
{
    tl_set_log_handler(NULL, NULL);
    tl_set_log_level(TL_LOG_WARN);
}
