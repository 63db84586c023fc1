/*
 * test_io_ckpt_util.h — what the checkpoint tests share: scratch
 * directories, whole-file reads and writes, a sample checkpoint whose every
 * byte is known, and a log catcher. test_io_ckpt_util.c holds no tests.
 */
#ifndef TPULOOP_TESTS_IO_CKPT_UTIL_H
#define TPULOOP_TESTS_IO_CKPT_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "tpuloop/checkpoint.h"

/* A new empty directory under /tmp (malloc'd path); ck_rmtree removes it
 * and the files in it. */
char *ck_tmpdir(void);
void ck_rmtree(const char *dir);

/* dir/name in a malloc'd string. */
char *ck_join(const char *dir, const char *name);

/* The whole file (malloc'd; *len its size); fails the test if unreadable. */
unsigned char *ck_read(const char *path, size_t *len);
void ck_write(const char *path, const void *buf, size_t len);

/* Files in dir whose name contains ".tmp-". */
int ck_count_temps(const char *dir);

/* The sample: five tensors of four dtypes (a scalar and an empty one among
 * them) and two metadata keys, with values derived from seed, so two seeds
 * give two different checkpoints of the same layout. */
typedef struct ck_sample {
    float kernel[4 * 5]; /* (4, 5) F32 "dense/kernel" */
    double bias[3];      /* (3) F64 "dense/bias" */
    int64_t step;        /* () I64 "global_step" */
    uint8_t mask[7];     /* (7) U8 "mask" */
    int32_t none[1];     /* (0, 3) I32 "empty" */
} ck_sample;

void ck_sample_fill(ck_sample *s, int seed);
tl_ckpt_writer *ck_sample_writer(const ck_sample *s);

/* Writes the sample of seed to path; fails the test on error. */
void ck_sample_write(const char *path, int seed);

/* The reader holds exactly the sample of seed. */
void ck_sample_check(const tl_ckpt_reader *r, int seed);

/* Catches tpuloop's log lines (warnings and above) into a buffer that
 * ck_log_text returns; ck_log_stop restores the default handler. */
void ck_log_start(void);
/* The same from INFO up (the level too, until ck_log_stop). */
void ck_log_start_info(void);
const char *ck_log_text(void);
void ck_log_stop(void);

#endif /* TPULOOP_TESTS_IO_CKPT_UTIL_H */
