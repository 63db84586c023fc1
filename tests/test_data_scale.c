/* tl_dataset_scale: map(lambda x: tf.cast(x, tf.float32) * s) over the
 * chosen numeric tensors — every source's features can be scaled (pixels
 * 0..255 converted from IDX into [0, 1]) — and nothing else. */
#include <criterion/criterion.h>
#include <string.h>

#include "tpuloop/dataset.h"
#include "tpuloop/tpuloop.h"

/* Four examples: features k, k + 1 (float32 via tl_dataset_labeled), label
 * k % 2. */
static tl_labeled_data *examples(void)
{
    static float x[8] = {0, 1, 2, 3, 254, 255, 128, 64};
    static int32_t y[4] = {0, 1, 0, 1};
    static tl_labeled_data d;
    d = (tl_labeled_data){.num_examples = 4, .num_features = 2, .num_classes = 2, .feature_rank = 1,
                          .feature_shape = {2}, .features = x, .labels = y};
    return &d;
}

Test(data_scale, features_become_float_times_the_factor_and_the_label_stays)
{
    tl_dataset *ds;
    cr_assert_eq(tl_dataset_labeled(examples(), &ds), TL_OK);
    const char *skip[] = {"label"};
    cr_assert_eq(tl_dataset_scale(ds, 1.0 / 255, NULL, 0, skip, 1, &ds), TL_OK, "%s", tl_last_error());
    cr_assert_eq(tl_dataset_batch(ds, 4, true, &ds), TL_OK);
    const tl_element *e;
    cr_assert_eq(tl_dataset_next(ds, &e), TL_OK);
    const tl_tensor *f = tl_element_find(e, "features"), *l = tl_element_find(e, "label");
    cr_assert(f != NULL && l != NULL);
    cr_assert_eq(f->dtype, TL_DT_FLOAT32);
    const float want[8] = {0, 1, 2, 3, 254, 255, 128, 64};
    for (int i = 0; i < 8; i++)
        cr_assert_eq(((const float *)f->data)[i], want[i] * (float)(1.0 / 255), "value %d", i);
    cr_assert_neq(l->dtype, TL_DT_FLOAT32, "the label is not scaled");
    cr_assert_eq(tl_dataset_next(ds, &e), TL_OK);
    cr_assert_null(e);
    tl_dataset_destroy(ds);
}

Test(data_scale, chosen_keys_and_named_errors)
{
    tl_dataset *ds;
    cr_assert_eq(tl_dataset_labeled(examples(), &ds), TL_OK);
    const char *keys[] = {"label"};
    cr_assert_eq(tl_dataset_scale(ds, 2.0, keys, 1, NULL, 0, &ds), TL_OK);
    const tl_element *e;
    cr_assert_eq(tl_dataset_next(ds, &e), TL_OK);
    const tl_tensor *l = tl_element_find(e, "label"), *f = tl_element_find(e, "features");
    cr_assert_eq(l->dtype, TL_DT_FLOAT32);
    cr_assert_eq(((const float *)l->data)[0], 0.0f);
    cr_assert_eq(((const float *)f->data)[1], 1.0f, "not chosen: unchanged");
    tl_dataset_destroy(ds);
    cr_assert_eq(tl_dataset_labeled(examples(), &ds), TL_OK);
    cr_assert_eq(tl_dataset_scale(ds, 0.0, NULL, 0, NULL, 0, &ds), TL_EINVAL);
    cr_assert(strstr(tl_last_error(), "scale: the factor must be a finite number > 0 (got 0)"), "%s",
              tl_last_error());
    cr_assert_null(ds);
    cr_assert_eq(tl_dataset_labeled(examples(), &ds), TL_OK);
    cr_assert_eq(tl_dataset_scale(ds, 1.0, NULL, 2, NULL, 0, &ds), TL_EINVAL);
    cr_assert_null(ds);
}
