/* data_int.h — what the files of data/ share. */
#ifndef TL_DATA_INT_H
#define TL_DATA_INT_H

#include "tpuloop/data.h"

/* One evaluated example of a binary model: P(class 1) and its label. */
typedef struct tl_scored {
    double score;
    int32_t label;
} tl_scored;

/* ROC AUC of n examples with labels in {0, 1} (any label other than 1
 * counts as 0): the Mann-Whitney U from average ranks, so a tie between a
 * positive and a negative counts one half. Sorts items by score. False, and
 * *auc = NaN, when a class is absent or a score is NaN (no AUC exists). */
bool tl_roc_auc(tl_scored *items, int64_t n, double *auc);

/* A tl_labeled_data with uninitialised features (N, D), labels (N) and ids
 * (N, num_ids; NULL when 0), shape fields set from (shape, rank) and
 * num_classes C; NULL when out of memory (the thread's error is not set).
 * The caller has checked that N * D floats fit in size_t. */
tl_labeled_data *tl_labeled_data_alloc(int64_t n, const int64_t *shape, int rank, int32_t num_classes,
                                       int64_t num_ids);

#endif /* TL_DATA_INT_H */
