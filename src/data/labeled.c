/* labeled.c — tl_labeled_data: features, labels and embedding ids held in
 * memory. */
#include "../base/base_int.h"
#include "data_int.h"

tl_labeled_data *tl_labeled_data_alloc(int64_t n, const int64_t *shape, int rank, int32_t num_classes,
                                       int64_t num_ids)
{
    TL_ASSERT(n >= 0 && rank >= 1 && rank <= TL_MAX_FEATURE_RANK && num_ids >= 0);
    int64_t d = 1;
    for (int i = 0; i < rank; i++)
        d *= shape[i];
    tl_labeled_data *ld = tl_calloc(1, sizeof *ld);
    if (ld == NULL)
        return NULL;
    ld->num_examples = n;
    ld->num_features = d;
    ld->num_classes = num_classes;
    ld->feature_rank = rank;
    for (int i = 0; i < rank; i++)
        ld->feature_shape[i] = shape[i];
    ld->num_ids = num_ids;
    /* not zeroed: every caller writes every element, and memset of the
     * features (188 MB for Fashion-MNIST's train split) is not free */
    ld->features = tl_alloc_array((size_t)n, (size_t)d * sizeof(float));
    ld->labels = tl_alloc_array((size_t)n, sizeof(int32_t));
    ld->ids = num_ids > 0 ? tl_alloc_array((size_t)n, (size_t)num_ids * sizeof(int64_t)) : NULL;
    if (ld->features == NULL || ld->labels == NULL || (num_ids > 0 && ld->ids == NULL)) {
        tl_labeled_data_destroy(ld);
        return NULL;
    }
    return ld;
}

void tl_labeled_data_destroy(tl_labeled_data *d)
{
    if (d == NULL)
        return;
    tl_free(d->features);
    tl_free(d->labels);
    tl_free(d->ids);
    tl_free(d);
}
