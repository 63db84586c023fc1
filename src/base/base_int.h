/*
 * base_int.h — what every part of tpuloop uses from base/: setting the
 * thread's error detail, allocation through the hook, logging, and the
 * invariant check for bugs.
 */
#ifndef TL_BASE_INT_H
#define TL_BASE_INT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "tpuloop/base.h"

#if defined(__GNUC__)
#define TL_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define TL_PRINTF(fmt, args)
#endif

/* tl_error (base.h) records a failure's status and message. */

/* Allocation through the hook. tl_calloc and tl_alloc_array check n * size for
 * overflow. None of them sets the thread's error; callers that fail report
 * TL_ENOMEM with tl_error_oom(). */
void *tl_malloc(size_t size);
void *tl_calloc(size_t n, size_t size);
void *tl_realloc(void *ptr, size_t size);
void *tl_alloc_array(size_t n, size_t size);
void tl_free(void *ptr);
char *tl_strdup(const char *s);
char *tl_strndup(const char *s, size_t n);
tl_status tl_error_oom(void);

/* Formats into a new tl_malloc'd string; NULL when out of memory. */
char *tl_asprintf(const char *fmt, ...) TL_PRINTF(1, 2);

/* A growable string for building messages and listings. */
typedef struct tl_strbuf {
    char *data; /* NUL-terminated; NULL until the first append */
    size_t len;
    size_t cap;
    int failed; /* set once an append ran out of memory; later appends do nothing */
} tl_strbuf;

void tl_strbuf_appendf(tl_strbuf *sb, const char *fmt, ...) TL_PRINTF(2, 3);
void tl_strbuf_append(tl_strbuf *sb, const char *s);
/* Appends n raw bytes (which may contain NULs). */
void tl_strbuf_append_n(tl_strbuf *sb, const void *data, size_t n);
/* Returns the string (never NULL unless out of memory) and hands ownership to
 * the caller; the buffer is reset. */
char *tl_strbuf_take(tl_strbuf *sb);
void tl_strbuf_free(tl_strbuf *sb);

/* Strict decimal integer parsing: optional sign, digits, nothing else (no
 * spaces, no "0x", no trailing text), with overflow detection. Returns 0 on
 * success, -1 when the text is not an integer, -2 on overflow. */
int tl_parse_int64(const char *s, int64_t *out);

/*
 * Python `re` patterns (pyregex.c). tl_pyregex_translate_named turns pat
 * into a POSIX extended regular expression (a tl_malloc'd string in *out),
 * anchored as ^(...)$ when full (re.fullmatch), else unanchored. Errors:
 * TL_EINVAL "<what> '<pat>' is not a supported regular expression: <why> at
 * position <i>" (what names the pattern: "LayoutMap key", "warm_start_vars");
 * TL_ENOMEM. tl_pyregex_translate is the same with what "LayoutMap key".
 */
tl_status tl_pyregex_translate_named(const char *what, const char *pat, bool full, char **out);
tl_status tl_pyregex_translate(const char *pat, bool full, char **out);

/* Checks that pat translates and compiles as re.match uses it (anchored at
 * the start): the errors of tl_pyregex_translate_named, and TL_EINVAL with
 * regerror's reason when the POSIX engine refuses the translation. */
tl_status tl_pyregex_check_match(const char *what, const char *pat);

/* A broken invariant: a bug in tpuloop, never bad input. */
#define TL_ASSERT(cond)                                               \
    do {                                                              \
        if (!(cond))                                                  \
            tl_assert_fail(#cond, __FILE__, __LINE__);                \
    } while (0)

_Noreturn void tl_assert_fail(const char *expr, const char *file, int line);

#define TL_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/*
 * TL_VECTOR_CLONES marks an element-wise loop worth widening past the x86-64
 * baseline (SSE2): GCC compiles it for AVX-512, AVX2 and the baseline and
 * the loader picks the best the CPU has (an ifunc). The results are the same
 * bits on every path: ISO C mode keeps -ffp-contract=off (no FMA contraction),
 * vector sqrt and division round exactly as the scalar ones, and float sums
 * are never vectorised without -fassociative-math, so no loop's order of
 * additions changes. Measured on the Adam update (Zen 4, 270k elements):
 * 2.1 cycles an element with SSE2, where sqrtps and divps are the bottleneck.
 */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define TL_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TL_VECTOR_CLONES
#endif

/*
 * The floating-point environment a step program runs in: TensorFlow's.
 * TensorFlow's kernel threads and XLA's CPU executables flush denormal
 * floats to zero (results, FTZ, and operands, DAZ) and round to nearest
 * (tsl::port::ScopedFlushDenormal and ScopedSetRound around every kernel),
 * so tpuloop's device threads do too: the same results as theirs where a
 * value underflows, and no microcode assist per denormal operand (an Adam
 * update whose second moments decay into denormals ran at a third of its
 * speed). tl_fp_set_kernel_env sets it on the calling thread for good (the
 * runtime's own threads); tl_fp_enter / tl_fp_leave set it around work on a
 * thread that is not the runtime's (a caller's) and restore the caller's.
 * Elsewhere than x86-64 and AArch64 only the rounding is set.
 */
typedef struct tl_fp_env {
    unsigned long saved;
} tl_fp_env;

void tl_fp_set_kernel_env(void);
void tl_fp_enter(tl_fp_env *env);
void tl_fp_leave(const tl_fp_env *env);
/* Whether the calling thread flushes denormals now. */
bool tl_fp_flushes_denormals(void);

#endif /* TL_BASE_INT_H */
