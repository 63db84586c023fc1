/* data_int.h — what the files of data/ share. */
#ifndef TL_DATA_INT_H
#define TL_DATA_INT_H

#include "tpuloop/data.h"

/* A tl_labeled_data with uninitialised features (N, D) and labels (N), shape
 * fields set from (shape, rank) and num_classes C; NULL when out of memory
 * (the thread's error is not set). The caller has checked that N * D floats
 * fit in size_t. */
tl_labeled_data *tl_labeled_data_alloc(int64_t n, const int64_t *shape, int rank, int32_t num_classes);

#endif /* TL_DATA_INT_H */
