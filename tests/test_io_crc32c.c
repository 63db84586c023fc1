/* CRC-32C: the check value of the CRC catalogue, RFC 3720's iSCSI vectors,
 * streaming, the hardware and table paths agreeing, and TFRecord masking. */
#include <criterion/criterion.h>
#include <string.h>

#include "io/crc32c.h"

Test(io_crc32c, check_value_and_rfc3720_vectors)
{
    cr_assert_eq(tl_crc32c_extend(0, "123456789", 9), 0xe3069283u);
    unsigned char buf[32];
    memset(buf, 0, sizeof buf);
    cr_assert_eq(tl_crc32c_extend(0, buf, sizeof buf), 0x8a9136aau);
    memset(buf, 0xff, sizeof buf);
    cr_assert_eq(tl_crc32c_extend(0, buf, sizeof buf), 0x62a8ab43u);
    for (int i = 0; i < 32; i++)
        buf[i] = (unsigned char)i;
    cr_assert_eq(tl_crc32c_extend(0, buf, sizeof buf), 0x46dd794eu);
    for (int i = 0; i < 32; i++)
        buf[i] = (unsigned char)(31 - i);
    cr_assert_eq(tl_crc32c_extend(0, buf, sizeof buf), 0x113fdb5cu);
    cr_assert_eq(tl_crc32c_extend(0, NULL, 0), 0u);
}

Test(io_crc32c, streaming_and_both_paths_agree)
{
    unsigned char buf[1031];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (unsigned char)(i * 131u + 7u);
    for (size_t n = 0; n <= sizeof buf; n += 13) {
        uint32_t whole = tl_crc32c_extend(0, buf, n);
        cr_assert_eq(whole, tl_crc32c_extend_portable(0, buf, n), "n=%zu", n);
        for (size_t cut = 0; cut <= n; cut += 5) {
            uint32_t c = tl_crc32c_extend(tl_crc32c_extend(0, buf, cut), buf + cut, n - cut);
            cr_assert_eq(c, whole, "n=%zu cut=%zu", n, cut);
        }
    }
}

Test(io_crc32c, mask_round_trips_and_matches_tensorflow)
{
    /* TensorFlow's Mask: ((crc >> 15) | (crc << 17)) + 0xa282ead8. */
    cr_assert_eq(tl_crc32c_mask(0), 0xa282ead8u);
    cr_assert_eq(tl_crc32c_mask(0xe3069283u), ((0xe3069283u >> 15) | (0xe3069283u << 17)) + 0xa282ead8u);
    for (uint32_t c = 1; c < 0xf0000000u; c = c * 3u + 17u)
        cr_assert_eq(tl_crc32c_unmask(tl_crc32c_mask(c)), c);
}
