/* test_data_dataset_util.c — fixtures for the dataset tests (see
 * test_data_dataset_util.h). No tests here. */
#include "test_data_dataset_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/compress.h"
#include "testutil.h"
#include "tpuloop/example.pb-c.h"

char *dd_tmpdir(void)
{
    char *t = strdup("/tmp/tl_dataset_XXXXXX");
    cr_assert_not_null(mkdtemp(t), "mkdtemp failed");
    return t;
}

char *dd_join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

void dd_rmtree(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char *p = dd_join(dir, e->d_name);
        unlink(p);
        free(p);
    }
    closedir(d);
    rmdir(dir);
}

void dd_drop_dir(char *dir)
{
    dd_rmtree(dir);
    free(dir);
}

uint8_t *dd_example(int64_t id, size_t *len)
{
    int64_t idv[1] = {id}, tags[3];
    float x[2] = {(float)id / 2, (float)id + 1};
    for (int i = 0; i < 3; i++)
        tags[i] = id + i;
    char name[32];
    snprintf(name, sizeof name, "n%lld", (long long)id);

    Tpuloop__Int64List li = TPULOOP__INT64_LIST__INIT, lt = TPULOOP__INT64_LIST__INIT;
    Tpuloop__FloatList lx = TPULOOP__FLOAT_LIST__INIT;
    Tpuloop__BytesList lb = TPULOOP__BYTES_LIST__INIT;
    li.n_value = 1;
    li.value = idv;
    lt.n_value = (size_t)(id % 3);
    lt.value = tags;
    lx.n_value = 2;
    lx.value = x;
    ProtobufCBinaryData bv = {strlen(name), (uint8_t *)name};
    lb.n_value = 1;
    lb.value = &bv;
    Tpuloop__Feature f[4] = {TPULOOP__FEATURE__INIT, TPULOOP__FEATURE__INIT, TPULOOP__FEATURE__INIT,
                             TPULOOP__FEATURE__INIT};
    f[0].kind_case = TPULOOP__FEATURE__KIND_INT64_LIST;
    f[0].int64_list = &li;
    f[1].kind_case = TPULOOP__FEATURE__KIND_FLOAT_LIST;
    f[1].float_list = &lx;
    f[2].kind_case = TPULOOP__FEATURE__KIND_INT64_LIST;
    f[2].int64_list = &lt;
    f[3].kind_case = TPULOOP__FEATURE__KIND_BYTES_LIST;
    f[3].bytes_list = &lb;
    const char *keys[4] = {"id", "x", "tags", "name"};
    Tpuloop__Features__FeatureEntry ent[4];
    Tpuloop__Features__FeatureEntry *ents[4];
    for (int i = 0; i < 4; i++) {
        tpuloop__features__feature_entry__init(&ent[i]);
        ent[i].key = (char *)keys[i];
        ent[i].value = &f[i];
        ents[i] = &ent[i];
    }
    Tpuloop__Features fs = TPULOOP__FEATURES__INIT;
    fs.n_feature = 4;
    fs.feature = ents;
    Tpuloop__Example ex = TPULOOP__EXAMPLE__INIT;
    ex.features = &fs;
    *len = tpuloop__example__get_packed_size(&ex);
    uint8_t *buf = malloc(*len + 1);
    cr_assert_eq(tpuloop__example__pack(&ex, buf), *len);
    return buf;
}

void dd_write_examples(const char *path, int c, int64_t first, int64_t count)
{
    tl_tfrecord_zwriter *w;
    ASSERT_OK(tl_tfrecord_zwriter_open(path, O_CREAT | O_TRUNC, (tl_tfrecord_compression)c, -1, &w));
    for (int64_t i = first; i < first + count; i++) {
        size_t n;
        uint8_t *b = dd_example(i, &n);
        ASSERT_OK(tl_tfrecord_zwriter_write(w, b, n));
        free(b);
    }
    ASSERT_OK(tl_tfrecord_zwriter_destroy(w));
}

void dd_write_strings(const char *path, const char *prefix, int count)
{
    tl_tfrecord_writer *w;
    ASSERT_OK(tl_tfrecord_writer_open(path, O_CREAT | O_TRUNC, &w));
    for (int i = 0; i < count; i++) {
        char buf[64];
        int n = snprintf(buf, sizeof buf, "%s%d", prefix, i);
        ASSERT_OK(tl_tfrecord_write(w, buf, (size_t)n));
    }
    ASSERT_OK(tl_tfrecord_writer_destroy(w));
}

const tl_feature_spec dd_specs[4] = {
    {.key = "id", .type = TL_SPEC_FIXED_LEN, .dtype = TL_FEATURE_INT64},
    {.key = "x", .type = TL_SPEC_FIXED_LEN, .dtype = TL_FEATURE_FLOAT, .rank = 1, .shape = {2}},
    {.key = "tags", .type = TL_SPEC_VAR_LEN, .dtype = TL_FEATURE_INT64},
    {.key = "name", .type = TL_SPEC_FIXED_LEN, .dtype = TL_FEATURE_BYTES},
};

size_t dd_drain(tl_dataset *ds, int64_t **out, int limit)
{
    size_t n = 0, cap = 64;
    int64_t *ids = malloc(cap * sizeof *ids);
    const tl_element *e;
    for (int k = 0; limit < 0 || k < limit; k++) {
        ASSERT_OK(tl_dataset_next(ds, &e));
        if (e == NULL)
            break;
        const tl_tensor *t = tl_element_find(e, "id");
        int64_t cnt = 1, *vals = NULL, one = 0;
        if (t != NULL) {
            cr_assert_eq(t->dtype, TL_DT_INT64);
            cnt = t->rank > 0 ? t->shape[0] : 1;
            vals = t->data;
        } else {
            const tl_tensor *r = tl_element_find(e, "record");
            if (r == NULL)
                r = tl_element_find(e, "label");
            cr_assert_not_null(r, "element without id, record or label");
            if (r->dtype == TL_DT_INT32) {
                one = *(int32_t *)r->data;
            } else {
                const tl_bytes *b = r->data;
                char buf[64] = {0};
                memcpy(buf, b->data, b->len < 63 ? b->len : 63);
                one = (buf[0] - 'A') * 1000 + atoll(buf + 1);
            }
            vals = &one;
        }
        while (n + (size_t)cnt > cap)
            ids = realloc(ids, (cap *= 2) * sizeof *ids);
        memcpy(ids + n, vals, (size_t)cnt * sizeof *ids);
        n += (size_t)cnt;
    }
    *out = ids;
    return n;
}

char *dd_records(tl_dataset *ds)
{
    size_t cap = 4096, len = 0;
    char *s = calloc(cap, 1);
    const tl_element *e;
    for (;;) {
        ASSERT_OK(tl_dataset_next(ds, &e));
        if (e == NULL)
            break;
        const tl_tensor *r = tl_element_find(e, "record");
        cr_assert_not_null(r);
        const tl_bytes *b = r->data;
        cr_assert_lt(len + b->len + 2, cap);
        if (len > 0)
            s[len++] = ' ';
        memcpy(s + len, b->data, b->len);
        len += b->len;
    }
    return s;
}
