/*
 * ckpt_int.h — what the checkpoint files share inside io/: the size
 * arithmetic and message helpers of safetensors.c that the reader
 * (safetensors_read.c) and the model_dir code (model_dir.c) use too.
 */
#ifndef TL_IO_CKPT_INT_H
#define TL_IO_CKPT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The bytes of a tensor of this shape and element size; 0 with *ok false
 * when they overflow 64 bits. A zero anywhere in the shape makes it 0,
 * however large the other dimensions. */
uint64_t tl_ckpt_tensor_bytes(const int64_t *shape, int rank, size_t esize, bool *ok);

struct tl_ckpt_writer;

/* The value of metadata key set on w (tl_ckpt_writer_set_meta), or NULL;
 * valid until the key is set again or w is destroyed. The manager reads
 * TL_CKPT_META_HOST_FILES from it. */
const char *tl_ckpt_writer_meta_get(const struct tl_ckpt_writer *w, const char *key);

/* "[4, 5]" into buf (cap >= 32; cut short with "...]" when it does not fit). */
void tl_ckpt_format_shape(char *buf, size_t cap, const int64_t *shape, int rank);

#endif /* TL_IO_CKPT_INT_H */
