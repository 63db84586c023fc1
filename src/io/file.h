/*
 * file.h — the file layer every checkpoint and index write goes through:
 * whole writes and reads that survive EINTR and short transfers, fsync of
 * files and directories, atomic replacement, mapping a file for reading, and
 * a fault injector for tests.
 *
 * Atomic replacement is the one way tpuloop changes a file other programs or
 * a restarted tpuloop may read:
 *
 *     tl_io_atomic a;
 *     if (tl_io_atomic_begin(&a, "/m/model.ckpt-200.safetensors") != TL_OK) ...
 *     st = tl_io_atomic_write(&a, buf, n);          // any number of writes
 *     if (st == TL_OK) st = tl_io_atomic_commit(&a); // or tl_io_atomic_abort(&a)
 *
 * begin creates "<path>.tmp-<pid>-<n>" beside the target (same directory, so
 * same filesystem, so rename is atomic); commit fsyncs it, renames it over
 * the target and fsyncs the directory, so that when commit returns TL_OK the
 * new content survives a power loss. Any failure on the way unlinks the
 * temporary file and leaves the target exactly as it was: a reader sees the
 * whole old file or the whole new one, never a mixture and never a torn write.
 * After a failed commit the object is closed; abort after commit (either way)
 * does nothing, so `abort` can sit on every cleanup path.
 *
 * Every error names the path and the system's reason, as
 * "/m/model.ckpt-200.safetensors.tmp-41-0: cannot write: No space left on device",
 * with TL_EIO (TL_ENOTFOUND where the file does not exist, TL_ENOMEM for memory).
 *
 * Fault injection: tl_io_fail_after(n, err) makes the n-th (1-based) fallible
 * call from now — open for writing, write, pwrite, fsync, rename, directory
 * fsync, unlink — fail with errno err, once. Tests step n through 1..K to
 * fail each call of a save in turn. The counters are atomic, so calls on
 * other threads count too (which call is "n-th" is then a race the test
 * must not depend on).
 */
#ifndef TL_IO_FILE_H
#define TL_IO_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "tpuloop/base.h"

/* ---- atomic replacement ------------------------------------------------- */

typedef struct tl_io_atomic {
    int fd;         /* the temporary file; -1 once closed */
    char *path;     /* the target */
    char *tmp_path; /* "<path>.tmp-<pid>-<n>" */
} tl_io_atomic;

/* Creates the temporary file for path (mode 0644 before the umask). On
 * failure the object is left closed, so tl_io_atomic_abort is still safe.
 * Errors: TL_EIO (the directory is missing or not writable, ...), TL_ENOMEM. */
tl_status tl_io_atomic_begin(tl_io_atomic *a, const char *path);

/* Appends n bytes. On failure the object stays open: the caller aborts. */
tl_status tl_io_atomic_write(tl_io_atomic *a, const void *buf, size_t n);

/* Writes n bytes at offset off (to patch a header once the data is known). */
tl_status tl_io_atomic_pwrite(tl_io_atomic *a, const void *buf, size_t n, uint64_t off);

/* fsync, close, rename over the target, fsync the directory. On failure the
 * temporary file is gone and the target untouched (except a failed directory
 * fsync after the rename: the new name is in place but may not be durable;
 * the status says so). The object is closed either way. */
tl_status tl_io_atomic_commit(tl_io_atomic *a);

/* Closes and unlinks the temporary file; nothing once closed. */
void tl_io_atomic_abort(tl_io_atomic *a);

/* begin + write + commit of one buffer. */
tl_status tl_io_write_file_atomic(const char *path, const void *buf, size_t n);

/* True when name (a file name, no directory) is a temporary file of
 * tl_io_atomic_begin: "<anything>.tmp-<digits>-<digits>". *pid gets the pid. */
int tl_io_is_temp_name(const char *name, long *pid);

/* ---- primitives --------------------------------------------------------- */

/* The whole buffer, retrying on EINTR and after short writes. path names the
 * file in messages. */
tl_status tl_io_write_all(int fd, const void *buf, size_t n, const char *path);
tl_status tl_io_pwrite_all(int fd, const void *buf, size_t n, uint64_t off, const char *path);
tl_status tl_io_fsync(int fd, const char *path);
tl_status tl_io_rename(const char *from, const char *to);

/* fsync of the directory that holds path (path's parent, "." for a bare
 * name). Filesystems that cannot sync directories (EINVAL) count as done. */
tl_status tl_io_fsync_parent(const char *path);

/* Removes path: TL_ENOTFOUND when it does not exist, TL_EIO otherwise. */
tl_status tl_io_unlink(const char *path);

/* mkdir -p: makes dir and every missing parent (mode 0777 before the umask).
 * Errors: TL_EIO "<what> <dir>: cannot create <part>: <strerror>" or
 * "<what> <dir>: not a directory"; TL_ENOMEM. */
tl_status tl_io_make_dirs(const char *dir, const char *what);

/* Reads the whole file into a new tl_malloc'd buffer with a NUL after the
 * last byte (so text can be parsed in place); *len excludes the NUL. Files
 * larger than max_bytes are TL_EINVAL. Errors: TL_ENOTFOUND, TL_EIO, TL_ENOMEM. */
tl_status tl_io_read_file(const char *path, size_t max_bytes, char **data, size_t *len);

/* A read-only view of a whole file: mmap where it works, else a copy. */
typedef struct tl_io_map {
    const unsigned char *data; /* (len); NULL when len is 0 */
    size_t len;
    int mapped; /* 1: munmap on close; 0: tl_free */
} tl_io_map;

/* Errors: TL_ENOTFOUND, TL_EIO (not a regular file, read failed), TL_ENOMEM. */
tl_status tl_io_map_file(const char *path, tl_io_map *m);
void tl_io_unmap(tl_io_map *m);

/* ---- fault injection (tests) -------------------------------------------- */

/* The n-th (1-based) fallible call from now fails with errno err, once;
 * n <= 0 disarms. err EINTR is retried like a real EINTR, so it tests the
 * retry path instead of failing. */
void tl_io_fail_after(int n, int err);

/* Every write and pwrite transfers at most max bytes a call (0: no cap), so
 * that tests reach the short-write loop. */
void tl_io_set_max_write(size_t max);

/* The n-th (1-based) fallible call from now, if it is a write or pwrite,
 * puts its first byte on the disk with every bit inverted (and succeeds):
 * data damaged between the memory it was checksummed in and the file, for
 * the tests of what a writer does with a file that does not read back.
 * Once; n <= 0 disarms. */
void tl_io_corrupt_after(int n);

/* How many fallible calls have been made since the process started. */
long tl_io_call_count(void);

#endif /* TL_IO_FILE_H */
