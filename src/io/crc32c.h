/*
 * crc32c.h — CRC-32C (Castagnoli), the checksum of TFRecord framing, of
 * TensorBoard event files and of tpuloop's checkpoints.
 *
 * Debian packages no C library for it (zlib's crc32 is the other
 * polynomial), so it is written here: the SSE4.2 crc32 instruction where the
 * CPU has it, else a slicing-by-8 table walk; both give the same values.
 *
 *     uint32_t c = tl_crc32c_extend(0, buf, len);      // whole buffer
 *     c = tl_crc32c_extend(c, more, more_len);         // continue a stream
 *     uint32_t stored = tl_crc32c_mask(c);             // TFRecord's masked form
 */
#ifndef TL_IO_CRC32C_H
#define TL_IO_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* The CRC-32C of the bytes so far (crc, 0 for none) followed by data[0..n).
 * tl_crc32c_extend(0, "123456789", 9) == 0xe3069283. */
uint32_t tl_crc32c_extend(uint32_t crc, const void *data, size_t n);

/* The table walk alone, for tests that compare the two paths. */
uint32_t tl_crc32c_extend_portable(uint32_t crc, const void *data, size_t n);

/* TFRecord's masking (tensorflow/core/lib/hash/crc32c.h): a rotation and an
 * offset, so that a CRC over data that contains CRCs stays well mixed. */
static inline uint32_t tl_crc32c_mask(uint32_t crc)
{
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

static inline uint32_t tl_crc32c_unmask(uint32_t masked)
{
    uint32_t rot = masked - 0xa282ead8u;
    return (rot >> 17) | (rot << 15);
}

#endif /* TL_IO_CRC32C_H */
