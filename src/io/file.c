/* file.c — whole reads and writes, fsync, atomic replacement, mapping, and
 * the fault injector (see file.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/base_int.h"
#include "file.h"

/* Large transfers are split: Linux moves at most 0x7ffff000 bytes a call
 * anyway, and a bounded request keeps a short write's retry cheap. */
#define IO_CHUNK ((size_t)1 << 30)

/* ---- fault injection ---------------------------------------------------- */

static _Atomic long io_calls;   /* fallible calls made so far */
static _Atomic long io_fail_at; /* the call (1-based value of io_calls) that fails; 0: none */
static _Atomic int io_fail_errno;
static _Atomic size_t io_max_write;
static _Atomic long io_corrupt_at; /* the call whose first byte is written inverted; 0: none */

void tl_io_fail_after(int n, int err)
{
    if (n <= 0) {
        atomic_store(&io_fail_at, 0);
        return;
    }
    atomic_store(&io_fail_errno, err);
    atomic_store(&io_fail_at, atomic_load(&io_calls) + n);
}

void tl_io_set_max_write(size_t max)
{
    atomic_store(&io_max_write, max);
}

void tl_io_corrupt_after(int n)
{
    atomic_store(&io_corrupt_at, n <= 0 ? 0 : atomic_load(&io_calls) + n);
}

long tl_io_call_count(void)
{
    return atomic_load(&io_calls);
}

/* Counts a fallible call (its 1-based number in *call); returns the errno
 * to fail it with, or 0 to make it for real. The armed call is consumed by
 * exactly one caller. */
static int injected_call(long *call)
{
    long c = atomic_fetch_add(&io_calls, 1) + 1;
    *call = c;
    long at = atomic_load(&io_fail_at);
    if (at != 0 && c == at && atomic_compare_exchange_strong(&io_fail_at, &at, 0))
        return atomic_load(&io_fail_errno);
    return 0;
}

static int injected(void)
{
    long c;
    return injected_call(&c);
}

/* ---- primitives --------------------------------------------------------- */

static tl_status sys_error(const char *path, const char *what, int err)
{
    if (err == ENOMEM)
        return tl_error(TL_ENOMEM, "%s: cannot %s: %s", path, what, strerror(err));
    if (err == ENOENT)
        return tl_error(TL_ENOTFOUND, "%s: cannot %s: %s", path, what, strerror(err));
    return tl_error(TL_EIO, "%s: cannot %s: %s", path, what, strerror(err));
}

/* One write or pwrite (off < 0: write), with the cap and the injector. */
static ssize_t write_once(int fd, const unsigned char *p, size_t n, int64_t off)
{
    long c;
    int e = injected_call(&c);
    if (e != 0) {
        errno = e;
        return -1;
    }
    long bad = atomic_load(&io_corrupt_at);
    if (bad != 0 && c == bad && n > 0 && atomic_compare_exchange_strong(&io_corrupt_at, &bad, 0)) {
        /* A byte damaged on its way to the disk: the call moves just it,
         * so the caller's loop writes the rest as a short write's. */
        unsigned char b = (unsigned char)~p[0];
        return off < 0 ? write(fd, &b, 1) : pwrite(fd, &b, 1, (off_t)off);
    }
    size_t cap = atomic_load(&io_max_write);
    if (cap != 0 && n > cap)
        n = cap;
    if (n > IO_CHUNK)
        n = IO_CHUNK;
    return off < 0 ? write(fd, p, n) : pwrite(fd, p, n, (off_t)off);
}

static tl_status write_loop(int fd, const void *buf, size_t n, int64_t off, const char *path)
{
    const unsigned char *p = buf;
    while (n > 0) {
        ssize_t w = write_once(fd, p, n, off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return sys_error(path, "write", errno);
        }
        /* write(2) returns 0 only for a zero-length request; treat it as a
         * full device rather than spin. */
        if (w == 0)
            return sys_error(path, "write", ENOSPC);
        p += w;
        n -= (size_t)w;
        if (off >= 0)
            off += w;
    }
    return TL_OK;
}

tl_status tl_io_write_all(int fd, const void *buf, size_t n, const char *path)
{
    return write_loop(fd, buf, n, -1, path);
}

tl_status tl_io_pwrite_all(int fd, const void *buf, size_t n, uint64_t off, const char *path)
{
    if (off > (uint64_t)INT64_MAX - n)
        return tl_error(TL_EINVAL, "%s: write offset %llu is out of range", path, (unsigned long long)off);
    return write_loop(fd, buf, n, (int64_t)off, path);
}

tl_status tl_io_fsync(int fd, const char *path)
{
    for (;;) {
        int e = injected();
        int rc = e ? -1 : fsync(fd);
        if (e)
            errno = e;
        if (rc == 0)
            return TL_OK;
        if (errno != EINTR)
            return sys_error(path, "fsync", errno);
    }
}

tl_status tl_io_rename(const char *from, const char *to)
{
    int e;
    do {
        e = injected();
        if (e == 0 && rename(from, to) != 0)
            e = errno;
    } while (e == EINTR);
    if (e == 0)
        return TL_OK;
    return tl_error(e == ENOENT ? TL_ENOTFOUND : TL_EIO, "%s: cannot rename to %s: %s", from, to, strerror(e));
}

/* The directory part of path: "." for a bare name, "/" for "/name". */
static char *parent_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (slash == NULL)
        return tl_strdup(".");
    if (slash == path)
        return tl_strdup("/");
    return tl_strndup(path, (size_t)(slash - path));
}

tl_status tl_io_fsync_parent(const char *path)
{
    char *dir = parent_of(path);
    if (dir == NULL)
        return tl_error_oom();
    tl_status st = TL_OK;
    int e, fd = -1;
    do {
        e = injected();
        if (e == 0 && (fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
            e = errno;
    } while (e == EINTR);
    if (fd >= 0) {
        int rc;
        do
            rc = fsync(fd);
        while (rc != 0 && errno == EINTR);
        /* Some filesystems cannot sync a directory and say so with EINVAL;
         * there is nothing more to do there. */
        if (rc != 0 && errno != EINVAL && errno != ENOTSUP)
            e = errno;
        close(fd);
    }
    if (e != 0)
        st = sys_error(dir, "fsync the directory", e);
    tl_free(dir);
    return st;
}

tl_status tl_io_unlink(const char *path)
{
    int e;
    do {
        e = injected();
        if (e == 0 && unlink(path) != 0)
            e = errno;
    } while (e == EINTR);
    return e == 0 ? TL_OK : sys_error(path, "remove", e);
}

/* ---- atomic replacement ------------------------------------------------- */

static _Atomic unsigned long tmp_counter;

tl_status tl_io_atomic_begin(tl_io_atomic *a, const char *path)
{
    a->fd = -1;
    a->path = NULL;
    a->tmp_path = NULL;
    a->path = tl_strdup(path);
    if (a->path == NULL)
        return tl_error_oom();
    /* O_EXCL guards against a leftover of a crashed process whose pid came
     * back; a fresh counter value gets a fresh name. */
    for (int attempt = 0; attempt < 100; attempt++) {
        unsigned long n = atomic_fetch_add(&tmp_counter, 1);
        tl_free(a->tmp_path);
        a->tmp_path = tl_asprintf("%s.tmp-%ld-%lu", path, (long)getpid(), n);
        if (a->tmp_path == NULL) {
            tl_io_atomic_abort(a);
            return tl_error_oom();
        }
        int e;
        do {
            e = injected();
            if (e == 0 && (a->fd = open(a->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)) < 0)
                e = errno;
        } while (e == EINTR);
        if (e == 0)
            return TL_OK;
        if (e != EEXIST) {
            tl_status st = sys_error(a->tmp_path, "create", e);
            if (st == TL_ENOTFOUND) /* the directory is missing: an I/O error, not a lookup */
                st = tl_error(TL_EIO, "%s", tl_last_error());
            tl_io_atomic_abort(a);
            return st;
        }
    }
    tl_status st = tl_error(TL_EIO, "%s: cannot create a temporary file: 100 names taken", path);
    tl_io_atomic_abort(a);
    return st;
}

tl_status tl_io_atomic_write(tl_io_atomic *a, const void *buf, size_t n)
{
    TL_ASSERT(a->fd >= 0);
    return tl_io_write_all(a->fd, buf, n, a->tmp_path);
}

tl_status tl_io_atomic_pwrite(tl_io_atomic *a, const void *buf, size_t n, uint64_t off)
{
    TL_ASSERT(a->fd >= 0);
    return tl_io_pwrite_all(a->fd, buf, n, off, a->tmp_path);
}

void tl_io_atomic_abort(tl_io_atomic *a)
{
    if (a->fd >= 0) {
        close(a->fd);
        a->fd = -1;
    }
    if (a->tmp_path != NULL)
        unlink(a->tmp_path); /* best effort, and never injected: cleanup must not fail */
    tl_free(a->tmp_path);
    tl_free(a->path);
    a->tmp_path = NULL;
    a->path = NULL;
}

tl_status tl_io_atomic_commit(tl_io_atomic *a)
{
    TL_ASSERT(a->fd >= 0);
    tl_status st = tl_io_fsync(a->fd, a->tmp_path);
    if (st == TL_OK) {
        /* close(2) can report a deferred write error (NFS); after fsync it
         * rarely does, but a failure still means the data may be bad. */
        int rc = close(a->fd);
        a->fd = -1;
        if (rc != 0 && errno != EINTR)
            st = sys_error(a->tmp_path, "close", errno);
    }
    if (st == TL_OK)
        st = tl_io_rename(a->tmp_path, a->path);
    if (st == TL_OK) {
        /* The temporary name no longer exists; abort must not unlink the
         * target's new name through a reused temporary name. */
        tl_free(a->tmp_path);
        a->tmp_path = NULL;
        st = tl_io_fsync_parent(a->path);
        if (st != TL_OK)
            st = tl_error(st, "%s (the new %s is in place but may not survive a power loss)", tl_last_error(),
                          a->path);
    }
    tl_io_atomic_abort(a);
    return st;
}

tl_status tl_io_write_file_atomic(const char *path, const void *buf, size_t n)
{
    tl_io_atomic a;
    tl_status st = tl_io_atomic_begin(&a, path);
    if (st != TL_OK)
        return st;
    st = tl_io_atomic_write(&a, buf, n);
    if (st == TL_OK)
        return tl_io_atomic_commit(&a);
    tl_io_atomic_abort(&a);
    return st;
}

int tl_io_is_temp_name(const char *name, long *pid)
{
    const char *t = strstr(name, ".tmp-");
    if (t == NULL || t == name)
        return 0;
    /* the last ".tmp-" is the one begin added */
    for (const char *u; (u = strstr(t + 1, ".tmp-")) != NULL;)
        t = u;
    const char *p = t + 5;
    long v = 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9'; p++, digits++)
        if (v < 100000000L)
            v = v * 10 + (*p - '0');
    if (digits == 0 || *p != '-')
        return 0;
    p++;
    if (!(*p >= '0' && *p <= '9'))
        return 0;
    while (*p >= '0' && *p <= '9')
        p++;
    if (*p != '\0')
        return 0;
    if (pid != NULL)
        *pid = v;
    return 1;
}

/* ---- reading ------------------------------------------------------------ */

static tl_status open_regular(const char *path, int *fd, size_t *len)
{
    do
        *fd = open(path, O_RDONLY | O_CLOEXEC);
    while (*fd < 0 && errno == EINTR);
    if (*fd < 0)
        return sys_error(path, "open", errno);
    struct stat sb;
    if (fstat(*fd, &sb) != 0) {
        int e = errno;
        close(*fd);
        return sys_error(path, "stat", e);
    }
    if (!S_ISREG(sb.st_mode)) {
        close(*fd);
        return tl_error(TL_EIO, "%s: not a regular file", path);
    }
    if ((uint64_t)sb.st_size > (uint64_t)SIZE_MAX) {
        close(*fd);
        return tl_error(TL_EIO, "%s: %lld bytes do not fit in memory", path, (long long)sb.st_size);
    }
    *len = (size_t)sb.st_size;
    return TL_OK;
}

/* Reads exactly n bytes; a file that shrank meanwhile is an error. */
static tl_status read_exact(int fd, unsigned char *buf, size_t n, const char *path)
{
    size_t got = 0;
    while (got < n) {
        size_t want = n - got < IO_CHUNK ? n - got : IO_CHUNK;
        ssize_t r = read(fd, buf + got, want);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return sys_error(path, "read", errno);
        }
        if (r == 0)
            return tl_error(TL_EIO, "%s: file shrank while being read (%zu of %zu bytes)", path, got, n);
        got += (size_t)r;
    }
    return TL_OK;
}

tl_status tl_io_read_file(const char *path, size_t max_bytes, char **data, size_t *len)
{
    *data = NULL;
    *len = 0;
    int fd;
    size_t n;
    tl_status st = open_regular(path, &fd, &n);
    if (st != TL_OK)
        return st;
    if (n > max_bytes) {
        close(fd);
        return tl_error(TL_EINVAL, "%s: %zu bytes is more than the %zu allowed", path, n, max_bytes);
    }
    char *buf = tl_malloc(n + 1);
    if (buf == NULL) {
        close(fd);
        return tl_error(TL_ENOMEM, "%s: out of memory for %zu bytes", path, n);
    }
    st = read_exact(fd, (unsigned char *)buf, n, path);
    close(fd);
    if (st != TL_OK) {
        tl_free(buf);
        return st;
    }
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return TL_OK;
}

tl_status tl_io_map_file(const char *path, tl_io_map *m)
{
    m->data = NULL;
    m->len = 0;
    m->mapped = 0;
    int fd;
    size_t n;
    tl_status st = open_regular(path, &fd, &n);
    if (st != TL_OK)
        return st;
    if (n == 0) {
        close(fd);
        return TL_OK;
    }
    void *p = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p != MAP_FAILED) {
        close(fd);
        m->data = p;
        m->len = n;
        m->mapped = 1;
        return TL_OK;
    }
    /* Filesystems without mmap (some FUSE mounts): read a copy. */
    unsigned char *buf = tl_malloc(n);
    if (buf == NULL) {
        close(fd);
        return tl_error(TL_ENOMEM, "%s: out of memory for %zu bytes", path, n);
    }
    st = read_exact(fd, buf, n, path);
    close(fd);
    if (st != TL_OK) {
        tl_free(buf);
        return st;
    }
    m->data = buf;
    m->len = n;
    return TL_OK;
}

void tl_io_unmap(tl_io_map *m)
{
    if (m->data != NULL) {
        if (m->mapped)
            munmap((void *)m->data, m->len);
        else
            tl_free((void *)m->data);
    }
    m->data = NULL;
    m->len = 0;
    m->mapped = 0;
}

tl_status tl_io_make_dirs(const char *dir, const char *what)
{
    char *p = tl_strdup(dir);
    if (p == NULL)
        return tl_error_oom();
    tl_status st = TL_OK;
    for (char *s = p + 1;; s++) {
        bool last = *s == '\0';
        if (*s != '/' && !last)
            continue;
        char saved = *s;
        *s = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            st = tl_error(TL_EIO, "%s %s: cannot create %s: %s", what, dir, p, strerror(errno));
            break;
        }
        *s = saved;
        if (last)
            break;
    }
    struct stat sb;
    if (st == TL_OK && (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)))
        st = tl_error(TL_EIO, "%s %s: not a directory", what, dir);
    tl_free(p);
    return st;
}
