/* model_lock.c — one trainer per model_dir: an flock(2) on
 * model_dir/.tpuloop.lock, held while the holder lives (see
 * tl_ckpt_lock_acquire in checkpoint.h).
 *
 * Why flock: the kernel drops it when the last descriptor of the open file
 * goes, so a trainer killed by SIGKILL or a crash leaves a file that is not
 * locked, and the next trainer takes it over without guessing from pids
 * (which come back) or timestamps (which need clocks to agree). And it
 * belongs to the open file description, not to the process as fcntl(2)'s
 * record locks do: a second estimator of the same process opens the file
 * again and is refused like any other trainer.
 *
 * The file says who holds it, one JSON object:
 *     {"pid": 4242, "host": "trainer-7", "started": "2024-05-01T12:00:00Z"}
 * read only for the message of a refusal. A clean release empties it, so a
 * non-empty file that is not locked is the mark of a holder that died. The
 * file itself stays: removing it would let a third trainer lock a new file
 * of the same name while a second still holds the old, unlinked one. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../base/base_int.h"
#include "file.h"
#include "tpuloop/checkpoint.h"

/* What a refusal reads of the holder's file at most. */
#define MAX_OWNER_TEXT 4096

struct tl_ckpt_lock {
    int fd;     /* holds the flock; -1 when the filesystem cannot lock */
    char *path;
};

/* Frees lk without touching the file: the lock was not ours, or never
 * taken. */
static void discard(tl_ckpt_lock *lk)
{
    if (lk->fd >= 0)
        close(lk->fd);
    tl_free(lk->path);
    tl_free(lk);
}

/* "pid 4242 on host trainer-7, started 2024-05-01T12:00:00Z" from the
 * file's text, or what is wrong with it. */
static void describe_owner(const char *text, size_t len, char *buf, size_t cap)
{
    if (len == 0) {
        snprintf(buf, cap, "its pid, host and start time are not written yet (it is starting, or stopping)");
        return;
    }
    json_t *o = json_loadb(text, len, 0, NULL);
    json_t *pid = json_object_get(o, "pid"), *host = json_object_get(o, "host"), *start = json_object_get(o, "started");
    if (!json_is_integer(pid) || !json_is_string(host) || !json_is_string(start)) {
        snprintf(buf, cap, "the lock file does not say which (%zu bytes that are not tpuloop's owner record)", len);
    } else {
        long long p = (long long)json_integer_value(pid);
        char name[256];
        bool here = gethostname(name, sizeof name) == 0 && strcmp(name, json_string_value(host)) == 0;
        snprintf(buf, cap, "pid %lld%s on host %.200s, started %.64s", p,
                 here && p == (long long)getpid() ? " (this process: another estimator)" : "",
                 json_string_value(host), json_string_value(start));
    }
    json_decref(o);
}

/* The holder's text, up to MAX_OWNER_TEXT bytes, from fd. */
static size_t read_owner(int fd, char *buf)
{
    size_t got = 0;
    while (got < MAX_OWNER_TEXT) {
        ssize_t r = pread(fd, buf + got, MAX_OWNER_TEXT - got, (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    while (got > 0 && (buf[got - 1] == '\n' || buf[got - 1] == ' '))
        got--;
    return got;
}

/* Our owner record: pid, host and start time in ISO 8601 (UTC). */
static int owner_record(char *buf, size_t cap)
{
    char host[256];
    if (gethostname(host, sizeof host) != 0 || host[0] == '\0')
        snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';
    char when[32];
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm) == NULL || strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(when, sizeof when, "unknown");
    json_t *o = json_pack("{s:I, s:s, s:s}", "pid", (json_int_t)getpid(), "host", host, "started", when);
    char *text = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    int n = text ? snprintf(buf, cap, "%s\n", text) : -1;
    free(text);
    return n;
}

tl_status tl_ckpt_lock_acquire(const char *model_dir, tl_ckpt_lock **out)
{
    *out = NULL;
    if (model_dir == NULL)
        return tl_error(TL_EINVAL, "model_dir is NULL");
    struct stat sb;
    if (stat(model_dir, &sb) != 0)
        return tl_error(errno == ENOENT ? TL_ENOTFOUND : TL_EIO, "model_dir %s: %s", model_dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return tl_error(TL_EIO, "model_dir %s is not a directory", model_dir);
    tl_ckpt_lock *lk = tl_calloc(1, sizeof *lk);
    if (lk == NULL)
        return tl_error_oom();
    size_t n = strlen(model_dir);
    lk->path = tl_asprintf("%s%s" TL_CKPT_LOCK_NAME, model_dir, n > 0 && model_dir[n - 1] == '/' ? "" : "/");
    if (lk->path == NULL) {
        tl_free(lk);
        return tl_error_oom();
    }
    do
        lk->fd = open(lk->path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    while (lk->fd < 0 && errno == EINTR);
    if (lk->fd < 0) {
        tl_status st = tl_error(TL_EIO, "%s: cannot open the model_dir's lock file: %s", lk->path, strerror(errno));
        discard(lk);
        return st;
    }
    int rc;
    do
        rc = flock(lk->fd, LOCK_EX | LOCK_NB);
    while (rc != 0 && errno == EINTR);
    int e = errno;
    char owner[MAX_OWNER_TEXT + 1];
    size_t olen = read_owner(lk->fd, owner);
    if (rc != 0 && e == EWOULDBLOCK) {
        char who[512];
        describe_owner(owner, olen, who, sizeof who);
        tl_status st = tl_error(TL_EBUSY, "model_dir %s is in use by another trainer: %s (it holds %s). Two trainers "
                                          "must not write one model_dir: stop that one first, or use another "
                                          "model_dir", model_dir, who, lk->path);
        discard(lk);
        return st;
    }
    if (rc != 0) {
        /* A filesystem without locks (ENOLCK on some network mounts):
         * training goes on, unguarded, and says so. */
        tl_log(TL_LOG_WARN, "%s: cannot lock (%s): a second trainer on this model_dir would not be detected",
               lk->path, strerror(e));
        close(lk->fd);
        lk->fd = -1;
        *out = lk;
        return TL_OK;
    }
    if (olen > 0) {
        char who[512];
        describe_owner(owner, olen, who, sizeof who);
        tl_log(TL_LOG_INFO, "%s: taking over the lock of a trainer that ended without releasing it (%s)", lk->path,
               who);
    }
    char rec[512];
    int len = owner_record(rec, sizeof rec);
    tl_status st = TL_OK;
    if (len < 0 || (size_t)len >= sizeof rec)
        st = tl_error_oom();
    else if (ftruncate(lk->fd, 0) != 0)
        st = tl_error(TL_EIO, "%s: cannot write: %s", lk->path, strerror(errno));
    else
        st = tl_io_pwrite_all(lk->fd, rec, (size_t)len, 0, lk->path);
    if (st != TL_OK) {
        tl_ckpt_lock_release(lk);
        return st;
    }
    *out = lk;
    return TL_OK;
}

const char *tl_ckpt_lock_path(const tl_ckpt_lock *lk)
{
    return lk->path;
}

void tl_ckpt_lock_release(tl_ckpt_lock *lk)
{
    if (lk == NULL)
        return;
    if (lk->fd >= 0) {
        /* Emptied first, so that the file of a clean release says nobody;
         * the lock goes with the last descriptor. */
        if (ftruncate(lk->fd, 0) != 0)
            tl_log(TL_LOG_WARN, "%s: cannot empty: %s", lk->path, strerror(errno));
        close(lk->fd);
    }
    tl_free(lk->path);
    tl_free(lk);
}
