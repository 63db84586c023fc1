/*
 * tpuloop/base.h — status codes, error details, the allocation hook and logging.
 *
 * Every fallible call in tpuloop returns a tl_status: TL_OK (0) on success and a
 * negative code on failure. The code says what kind of failure it was (the
 * categories follow Python's exceptions, because the people who use tpuloop
 * read TensorFlow's messages: TL_EINVAL is a ValueError, TL_ETYPE a TypeError,
 * TL_ERUNTIME a RuntimeError, TL_ENOTFOUND a KeyError). The detail — which
 * field, which value, what was allowed — is left in a thread-local message that
 * tl_last_error() returns until the next failing call on the same thread.
 *
 *     tl_config *cfg;
 *     if (tl_config_create(&cfg) != TL_OK) ...
 *     tl_status st = tl_config_set(cfg, "num_cores_per_replica", "3");
 *     if (st != TL_OK)
 *         fprintf(stderr, "error: %s\n", tl_last_error());
 *         // error: num_cores_per_replica must be 1, 2, 4, 8, 16, 32, 64, 128; got 3
 *
 * Bad input never aborts: it returns a status. A broken internal invariant (a
 * bug in tpuloop) prints file:line and aborts; that is the only abort.
 */
#ifndef TPULOOP_BASE_H
#define TPULOOP_BASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TL_API __attribute__((visibility("default")))
#else
#define TL_API
#endif

#define TL_VERSION_MAJOR 0
#define TL_VERSION_MINOR 1
#define TL_VERSION_PATCH 0
#define TL_VERSION_STRING "0.1.0"

/*
 * The status list: name, value, message. Values are append-only; never
 * renumber. TL_OK is 0 and every error is negative.
 */
#define TL_STATUS_MAP(X)                                                   \
    X(OK, 0, "success")                                                    \
    X(EINVAL, -1, "invalid value")          /* Python's ValueError */      \
    X(ETYPE, -2, "wrong type")              /* Python's TypeError */       \
    X(ERUNTIME, -3, "runtime error")        /* Python's RuntimeError */    \
    X(ENOTFOUND, -4, "not found")           /* Python's KeyError */        \
    X(ENOTIMPL, -5, "not implemented")      /* NotImplementedError */      \
    X(ENOMEM, -6, "out of memory")                                         \
    X(EIO, -7, "input/output error")                                       \
    X(EPARSE, -8, "malformed input")        /* syntax errors in a file */  \
    X(EUNKNOWN, -9, "unknown option")       /* a key no table knows */     \
    X(EBUSY, -10, "resource busy")          /* another holder has it */

typedef enum {
#define TL_STATUS_ENUM_(name, value, msg) TL_##name = value,
    TL_STATUS_MAP(TL_STATUS_ENUM_)
#undef TL_STATUS_ENUM_
} tl_status;

/* The generic message of a status ("invalid value"); "unknown status" for a
 * value not in the list. Never NULL. */
TL_API const char *tl_strerror(tl_status st);

/* The name of a status ("TL_EINVAL"); "TL_UNKNOWN_STATUS" for a value not in
 * the list. Never NULL. */
TL_API const char *tl_err_name(tl_status st);

/* True for the statuses that mean "the input was wrong" (a value, a type, a
 * key, a file's syntax) rather than "the machine failed" (memory, I/O). The
 * CLI exits 2 for the first kind and 1 for the second. */
TL_API bool tl_status_is_input_error(tl_status st);

/* The detailed message of the most recent failing call on this thread, or ""
 * if none failed yet. The pointer stays valid until the next tpuloop call on
 * the same thread. */
TL_API const char *tl_last_error(void);

/* The status of the most recent failing call on this thread (TL_OK if none). */
TL_API tl_status tl_last_status(void);

/* Forgets the thread's last error. */
TL_API void tl_clear_error(void);

#if defined(__GNUC__)
#define TL_FORMAT(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define TL_FORMAT(fmt, args)
#endif

/* Records st and the formatted message as this thread's last error (what
 * tl_last_error then returns) and returns st, so a failing path reads
 * `return tl_error(TL_EINVAL, "batch_size: must be >= 1 (got %d)", b);` —
 * in tpuloop, and in a callback (input_fn, model_fn, host_call) or a program
 * that wants its failure told in its own words. */
TL_API tl_status tl_error(tl_status st, const char *fmt, ...) TL_FORMAT(2, 3);

/*
 * The allocation hook. Every allocation tpuloop makes goes through it, so a
 * test can fail the Nth allocation and check that every constructor unwinds
 * without leaking. Set it before any other call; it is not safe to change while
 * other threads use tpuloop. NULL restores malloc/realloc/free.
 */
typedef struct tl_allocator {
    void *(*malloc_fn)(size_t size, void *ud);
    void *(*realloc_fn)(void *ptr, size_t size, void *ud);
    void (*free_fn)(void *ptr, void *ud);
    void *ud;
} tl_allocator;

TL_API void tl_set_allocator(const tl_allocator *a);

/*
 * Logging. Messages below the level (TL_LOG_WARN by default) are dropped. The default handler writes
 * "W tpuloop: <message>" lines to stderr. A handler is called on the thread
 * that logs and must be thread-safe. Like the allocator, set these first.
 */
typedef enum {
    TL_LOG_DEBUG = 0,
    TL_LOG_INFO = 1,
    TL_LOG_WARN = 2,
    TL_LOG_ERROR = 3,
    TL_LOG_OFF = 4
} tl_log_level;

typedef void (*tl_log_fn)(tl_log_level level, const char *msg, void *ud);

/* NULL restores the default handler. */
TL_API void tl_set_log_handler(tl_log_fn fn, void *ud);
TL_API void tl_set_log_level(tl_log_level level);

/* Logs the formatted message at level through the handler (nothing below
 * the level set). */
TL_API void tl_log(tl_log_level level, const char *fmt, ...) TL_FORMAT(2, 3);

#ifdef __cplusplus
}
#endif
#endif /* TPULOOP_BASE_H */
