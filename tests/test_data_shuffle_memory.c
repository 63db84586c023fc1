/* A shuffle reading straight from a source in memory (tensor slices,
 * labeled examples, IDX) buffers positions, not copies: the same elements in
 * the same order as a shuffle of elements, for every epoch; a saved state of
 * a few bytes per slot instead of the data; the same continuation after a
 * restore; and a state saved with elements (tpuloop before this, or an input
 * without random access) still restores. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tpuloop/config.h" /* tl_free_string */
#include "tpuloop/dataset.h"

#define ROWS 300
#define WIDTH 64

static float pixels[ROWS * WIDTH];
static int32_t labels[ROWS];

static void fill(void)
{
    for (int i = 0; i < ROWS * WIDTH; i++)
        pixels[i] = (float)(i % 977) * 0.5f;
    for (int i = 0; i < ROWS; i++)
        labels[i] = i;
}

/* tensor_slices -> [take(-1), which hides the random access] -> shuffle -> repeat(3). */
static tl_dataset *pipeline(bool elements, int64_t buffer)
{
    fill();
    tl_tensor cols[2] = {{.key = "x", .dtype = TL_DT_FLOAT32, .rank = 2, .shape = {ROWS, WIDTH}, .data = pixels},
                         {.key = "label", .dtype = TL_DT_INT32, .rank = 1, .shape = {ROWS}, .data = labels}};
    tl_dataset *ds;
    ASSERT_OK(tl_dataset_from_tensor_slices(cols, 2, &ds));
    if (elements)
        ASSERT_OK(tl_dataset_take(ds, -1, &ds));
    ASSERT_OK(tl_dataset_shuffle(ds, buffer, 7, true, &ds));
    ASSERT_OK(tl_dataset_repeat(ds, 3, &ds));
    return ds;
}

/* The next element's label, checking its pixels are its row's; -1 at the end. */
static int next_label(tl_dataset *ds)
{
    const tl_element *e;
    ASSERT_OK(tl_dataset_next(ds, &e));
    if (e == NULL)
        return -1;
    int32_t y = *(const int32_t *)tl_element_find(e, "label")->data;
    cr_assert(memcmp(tl_element_find(e, "x")->data, pixels + (size_t)y * WIDTH, WIDTH * sizeof(float)) == 0,
              "row %d's pixels", y);
    return y;
}

/* got, restored after element `from`, goes on as want does, to the end. */
static void expect_same_rest(tl_dataset *want, tl_dataset *got, int from)
{
    for (int k = from; k < 3 * ROWS; k++) {
        int y = next_label(want);
        cr_assert_eq(next_label(got), y, "element %d after the restore", k);
    }
    cr_assert_eq(next_label(got), -1);
}

Test(data_shuffle_memory, the_same_order_as_a_shuffle_of_elements)
{
    for (int64_t buffer = 1; buffer <= 1024; buffer *= 8) {
        tl_dataset *a = pipeline(false, buffer), *b = pipeline(true, buffer);
        for (int k = 0; k < 3 * ROWS; k++) {
            int ya = next_label(a), yb = next_label(b);
            cr_assert_eq(ya, yb, "buffer %lld, element %d: %d against %d", (long long)buffer, k, ya, yb);
            cr_assert_geq(ya, 0);
        }
        cr_assert_eq(next_label(a), -1);
        cr_assert_eq(next_label(b), -1);
        tl_dataset_destroy(a);
        tl_dataset_destroy(b);
    }
}

Test(data_shuffle_memory, the_state_holds_positions_and_restores)
{
    tl_dataset *a = pipeline(false, 200), *b = pipeline(true, 200);
    for (int k = 0; k < 450; k++) /* into the second epoch, the buffer full */
        cr_assert_eq(next_label(a), next_label(b));
    char *sa, *sb;
    ASSERT_OK(tl_dataset_save(a, &sa));
    ASSERT_OK(tl_dataset_save(b, &sb));
    cr_assert(strstr(sa, "\"indices\":[") != NULL, "%.300s", sa);
    cr_assert_lt(strlen(sa) * 20, strlen(sb), "positions (%zu bytes) against elements (%zu bytes)", strlen(sa),
                 strlen(sb));
    tl_dataset *r = pipeline(false, 200);
    ASSERT_OK(tl_dataset_restore(r, sa));
    expect_same_rest(a, r, 450);
    tl_free_string(sa);
    tl_free_string(sb);
    tl_dataset_destroy(a);
    tl_dataset_destroy(b);
    tl_dataset_destroy(r);
}

/* A state whose shuffle holds elements (as tpuloop before random access
 * wrote them) restores into the shuffle of positions: its nodes are the
 * element pipeline's without the take node, which only hid the access. */
Test(data_shuffle_memory, a_state_of_elements_restores)
{
    tl_dataset *b = pipeline(true, 200);
    for (int k = 0; k < 250; k++)
        cr_assert_geq(next_label(b), 0);
    char *sb;
    ASSERT_OK(tl_dataset_save(b, &sb));
    json_error_t err;
    json_t *j = json_loads(sb, 0, &err);
    cr_assert_not_null(j, "%s", err.text);
    json_t *nodes = json_object_get(j, "nodes");
    size_t n = json_array_size(nodes);
    size_t take = n;
    for (size_t i = 0; i < n; i++)
        if (strncmp(json_string_value(json_object_get(json_array_get(nodes, i), "node")), "take", 4) == 0)
            take = i;
    cr_assert_lt(take, n, "%.300s", sb);
    cr_assert_eq(json_array_remove(nodes, take), 0);
    char *old = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
    cr_assert_not_null(old);
    tl_dataset *r = pipeline(false, 200);
    ASSERT_OK(tl_dataset_restore(r, old));
    expect_same_rest(b, r, 250);
    free(old);
    json_decref(j);
    tl_free_string(sb);
    tl_dataset_destroy(b);
    tl_dataset_destroy(r);
}

Test(data_shuffle_memory, damaged_positions_are_refused)
{
    tl_dataset *a = pipeline(false, 50);
    for (int k = 0; k < 60; k++)
        cr_assert_geq(next_label(a), 0);
    char *s;
    ASSERT_OK(tl_dataset_save(a, &s));
    json_t *j = json_loads(s, 0, NULL);
    json_t *sh = NULL, *nodes = json_object_get(j, "nodes");
    for (size_t i = 0; i < json_array_size(nodes); i++)
        if (json_object_get(json_array_get(nodes, i), "indices") != NULL)
            sh = json_array_get(nodes, i);
    cr_assert_not_null(sh, "%.300s", s);
    json_t *ix = json_object_get(sh, "indices");
    int64_t hole = json_integer_value(json_object_get(sh, "hole"));
    cr_assert_geq(hole, 0, "after an output the slot it left is the hole");
    size_t used = hole == 0 ? 1 : 0;
    /* a position past the source: refused when it is made */
    json_array_set_new(ix, used, json_integer(ROWS + 5));
    char *bad = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
    tl_dataset *r = pipeline(false, 50);
    ASSERT_OK(tl_dataset_restore(r, bad));
    tl_status st = TL_OK;
    const tl_element *e;
    for (int k = 0; k < 3 * ROWS && st == TL_OK; k++)
        if ((st = tl_dataset_next(r, &e)) == TL_OK && e == NULL)
            break;
    cr_assert_eq(st, TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "row 305 outside 0..299") != NULL, "%s", tl_last_error());
    tl_dataset_destroy(r);
    free(bad);
    /* the hole holding a position */
    json_array_set_new(ix, used, json_integer(3));
    json_array_set_new(ix, (size_t)hole, json_integer(4));
    bad = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
    r = pipeline(false, 50);
    ASSERT_ERR(tl_dataset_restore(r, bad), TL_EINVAL, "but the hole is");
    tl_dataset_destroy(r);
    free(bad);
    /* not an array of the buffer's length */
    json_object_set_new(sh, "indices", json_array());
    bad = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
    r = pipeline(false, 50);
    ASSERT_ERR(tl_dataset_restore(r, bad), TL_EINVAL, "\"indices\" must be an array of 50 integers");
    tl_dataset_destroy(r);
    free(bad);
    /* a state of positions into the pipeline of elements: another pipeline, named as such */
    r = pipeline(true, 50);
    ASSERT_ERR(tl_dataset_restore(r, s), TL_EINVAL, "the saved pipeline has 3 nodes, this one 4");
    tl_dataset_destroy(r);
    json_decref(j);
    tl_free_string(s);
    tl_dataset_destroy(a);
}

/* A batch over a source in memory, or a shuffle, repeat or scale of one,
 * copies its rows straight into the batch: the same batches as batch() of
 * elements, for every combination, and after a restore. */
static tl_dataset *batched(bool elements, int shape)
{
    fill();
    tl_tensor cols[2] = {{.key = "x", .dtype = TL_DT_FLOAT32, .rank = 2, .shape = {ROWS, WIDTH}, .data = pixels},
                         {.key = "label", .dtype = TL_DT_INT32, .rank = 1, .shape = {ROWS}, .data = labels}};
    tl_dataset *ds;
    ASSERT_OK(tl_dataset_from_tensor_slices(cols, 2, &ds));
    if (elements)
        ASSERT_OK(tl_dataset_take(ds, -1, &ds));
    if (shape & 16) { /* scale(0.5) over "x": the rows are made scaled */
        const char *x = "x";
        ASSERT_OK(tl_dataset_scale(ds, 0.5, &x, 1, NULL, 0, &ds));
    }
    if (shape & 1)
        ASSERT_OK(tl_dataset_shuffle(ds, 64, 3, true, &ds));
    if (shape & 2)
        ASSERT_OK(tl_dataset_repeat(ds, 2, &ds));
    if (shape & 4)
        ASSERT_OK(tl_dataset_shuffle(ds, 100, 5, true, &ds)); /* over the repeat: positions of both passes */
    ASSERT_OK(tl_dataset_batch(ds, 32, (shape & 8) != 0, &ds));
    return ds;
}

/* The next batch's labels into y (its row count), checking its pixels
 * (times scale). */
static int64_t next_batch(tl_dataset *ds, int32_t *y, float scale)
{
    const tl_element *e;
    ASSERT_OK(tl_dataset_next(ds, &e));
    if (e == NULL)
        return 0;
    const tl_tensor *x = tl_element_find(e, "x"), *l = tl_element_find(e, "label");
    cr_assert(x->rank == 2 && x->shape[1] == WIDTH && l->rank == 1 && l->shape[0] == x->shape[0]);
    for (int64_t r = 0; r < x->shape[0]; r++) {
        y[r] = ((const int32_t *)l->data)[r];
        for (int c = 0; c < WIDTH; c++)
            cr_assert_eq(((const float *)x->data)[r * WIDTH + c], pixels[(size_t)y[r] * WIDTH + c] * scale);
    }
    return x->shape[0];
}

Test(data_shuffle_memory, batches_gathered_from_memory_are_batch_of_elements)
{
    for (int shape = 0; shape < 32; shape++) {
        float scale = shape & 16 ? 0.5f : 1.0f;
        tl_dataset *a = batched(false, shape), *b = batched(true, shape), *r = NULL;
        int32_t ya[32], yb[32];
        for (int k = 0;; k++) {
            if (k == 5) { /* save and go on from a restored copy */
                char *s;
                ASSERT_OK(tl_dataset_save(a, &s));
                r = batched(false, shape);
                ASSERT_OK(tl_dataset_restore(r, s));
                tl_free_string(s);
                tl_dataset_destroy(a);
                a = r;
            }
            int64_t na = next_batch(a, ya, scale), nb = next_batch(b, yb, scale);
            cr_assert_eq(na, nb, "pipeline %d, batch %d: %lld rows against %lld", shape, k, (long long)na,
                         (long long)nb);
            if (na == 0)
                break;
            cr_assert(memcmp(ya, yb, (size_t)na * sizeof *ya) == 0, "pipeline %d, batch %d differs", shape, k);
        }
        tl_dataset_destroy(a);
        tl_dataset_destroy(b);
    }
}
