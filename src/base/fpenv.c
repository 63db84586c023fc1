/* fpenv.c — TensorFlow's floating-point environment for kernels
 * (base_int.h): denormals flushed to zero, rounding to nearest. */
#include <fenv.h>

#include "base_int.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>

/* MXCSR: flush-to-zero (results) and denormals-are-zero (operands); the
 * rounding field (bits 13-14) cleared is round to nearest. */
#define CSR_FTZ 0x8000u
#define CSR_DAZ 0x0040u
#define CSR_ROUND 0x6000u

static unsigned long get_env(void) { return _mm_getcsr(); }
static void set_env(unsigned long v) { _mm_setcsr((unsigned)v); }
static unsigned long kernel_env(unsigned long v) { return (v | CSR_FTZ | CSR_DAZ) & ~(unsigned long)CSR_ROUND; }
static bool flushes(unsigned long v) { return (v & (CSR_FTZ | CSR_DAZ)) == (CSR_FTZ | CSR_DAZ); }

#elif defined(__aarch64__)

/* FPCR: FZ (bit 24) flushes denormal operands and results; RMode (bits
 * 22-23) cleared is round to nearest. */
#define FPCR_FZ (1ul << 24)
#define FPCR_RMODE (3ul << 22)

static unsigned long get_env(void) { return (unsigned long)__builtin_aarch64_get_fpcr64(); }
static void set_env(unsigned long v) { __builtin_aarch64_set_fpcr64(v); }
static unsigned long kernel_env(unsigned long v) { return (v | FPCR_FZ) & ~FPCR_RMODE; }
static bool flushes(unsigned long v) { return (v & FPCR_FZ) != 0; }

#else

static unsigned long get_env(void) { return (unsigned long)fegetround(); }
static void set_env(unsigned long v) { fesetround((int)v); }
static unsigned long kernel_env(unsigned long v) { (void)v; return (unsigned long)FE_TONEAREST; }
static bool flushes(unsigned long v) { (void)v; return false; }

#endif

void tl_fp_set_kernel_env(void)
{
    set_env(kernel_env(get_env()));
}

void tl_fp_enter(tl_fp_env *env)
{
    env->saved = get_env();
    set_env(kernel_env(env->saved));
}

void tl_fp_leave(const tl_fp_env *env)
{
    set_env(env->saved);
}

bool tl_fp_flushes_denormals(void)
{
    return flushes(get_env());
}
