/*
 * test_data_dataset_util.h — what the dataset tests share: a scratch
 * directory, TFRecord fixtures of tf.Examples whose every value follows from
 * an id, and reading a whole pipeline into a list of ids.
 * test_data_dataset_util.c holds no tests.
 */
#ifndef TPULOOP_TESTS_DATA_DATASET_UTIL_H
#define TPULOOP_TESTS_DATA_DATASET_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "tpuloop/dataset.h"

/* A new empty directory under /tmp (malloc'd); dd_rmtree removes it. */
char *dd_tmpdir(void);
void dd_rmtree(const char *dir);
/* dd_rmtree(dir), then free(dir): the end of a directory from dd_tmpdir. */
void dd_drop_dir(char *dir);
/* dir/name, malloc'd. */
char *dd_join(const char *dir, const char *name);

/* The serialized tf.Example of id (malloc'd, *len its size):
 *   "id"   int64 [id]
 *   "x"    float [id / 2, id + 1]
 *   "tags" int64 [id, id + 1, ...] (id % 3 values)
 *   "name" bytes ["n<id>"] */
uint8_t *dd_example(int64_t id, size_t *len);

/* Writes examples first..first+count-1 to path with compression c (0 NONE,
 * 1 GZIP, 2 ZLIB). */
void dd_write_examples(const char *path, int c, int64_t first, int64_t count);

/* Writes the raw records "<prefix><i>" for i in 0..count-1 (plain). */
void dd_write_strings(const char *path, const char *prefix, int count);

/* The specs of the fixture: id (int64 scalar), x (float (2)), tags
 * (VarLen int64), name (bytes scalar). */
extern const tl_feature_spec dd_specs[4];

/* The ids of every element of ds until its end: an element's "id" tensor
 * (each value of a batched one), or, without one, its "record" bytes parsed
 * as text after the first character ("A12" is 12, plus 1000 per letter
 * after 'A'), reading at most limit elements (-1: all). Fails the test on
 * an error. Returns the count; the ids (malloc'd) in *out. */
size_t dd_drain(tl_dataset *ds, int64_t **out, int limit);

/* The records of ds joined with spaces ("A0 A1 B0"), malloc'd. */
char *dd_records(tl_dataset *ds);

#endif /* TPULOOP_TESTS_DATA_DATASET_UTIL_H */
