/* crc32c.c — CRC-32C: the SSE4.2 instruction when the CPU has it, a
 * slicing-by-8 table otherwise (see crc32c.h). */
#include <pthread.h>
#include <string.h>

#include "crc32c.h"

#define POLY 0x82f63b78u /* Castagnoli, reflected */

/* table[k][b]: the CRC of byte b followed by k zero bytes, built once. */
static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void build_table(void)
{
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t c = b;
        for (int i = 0; i < 8; i++)
            c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
        table[0][b] = c;
    }
    for (uint32_t b = 0; b < 256; b++)
        for (int k = 1; k < 8; k++)
            table[k][b] = (table[k - 1][b] >> 8) ^ table[0][table[k - 1][b] & 0xff];
}

uint32_t tl_crc32c_extend_portable(uint32_t crc, const void *data, size_t n)
{
    pthread_once(&table_once, build_table);
    const unsigned char *p = data;
    uint32_t c = ~crc;
    while (n >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        lo = __builtin_bswap32(lo);
        hi = __builtin_bswap32(hi);
#endif
        lo ^= c;
        c = table[7][lo & 0xff] ^ table[6][(lo >> 8) & 0xff] ^ table[5][(lo >> 16) & 0xff] ^ table[4][lo >> 24] ^
            table[3][hi & 0xff] ^ table[2][(hi >> 8) & 0xff] ^ table[1][(hi >> 16) & 0xff] ^ table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n-- > 0)
        c = (c >> 8) ^ table[0][(c ^ *p++) & 0xff];
    return ~c;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <nmmintrin.h>

__attribute__((target("sse4.2"))) static uint32_t extend_sse42(uint32_t crc, const void *data, size_t n)
{
    const unsigned char *p = data;
    uint64_t c = ~crc;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = _mm_crc32_u64(c, v);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n-- > 0)
        c32 = _mm_crc32_u8(c32, *p++);
    return ~c32;
}

uint32_t tl_crc32c_extend(uint32_t crc, const void *data, size_t n)
{
    /* The answer never changes, so racing first callers agree. */
    static int have = -1; /* -1 unknown, 0 no, 1 yes */
    int h = __atomic_load_n(&have, __ATOMIC_RELAXED);
    if (h < 0) {
        __builtin_cpu_init();
        h = __builtin_cpu_supports("sse4.2") ? 1 : 0;
        __atomic_store_n(&have, h, __ATOMIC_RELAXED);
    }
    return h ? extend_sse42(crc, data, n) : tl_crc32c_extend_portable(crc, data, n);
}
#else
uint32_t tl_crc32c_extend(uint32_t crc, const void *data, size_t n)
{
    return tl_crc32c_extend_portable(crc, data, n);
}
#endif
