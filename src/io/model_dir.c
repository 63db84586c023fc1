/* model_dir.c — checkpoint file names, listing a model_dir, finding the
 * checkpoint to resume from, and the manager that saves and retires
 * checkpoints as TensorFlow's Saver does (tensorflow/python/training/
 * saver.py: _RecordLastCheckpoint, _MaybeDeleteOldCheckpoints,
 * recover_last_checkpoints). */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../base/base_int.h"
#include "ckpt_int.h"
#include "file.h"
#include "tpuloop/checkpoint.h"

#define NAME_HEAD TL_CKPT_PREFIX "-" /* "model.ckpt-" */

tl_status tl_ckpt_path(const char *model_dir, int64_t step, char *buf, size_t cap)
{
    if (step < 0)
        return tl_error(TL_EINVAL, "checkpoint step must be >= 0, got %lld", (long long)step);
    size_t n = strlen(model_dir);
    int len = snprintf(buf, cap, "%s%s" NAME_HEAD "%lld" TL_CKPT_SUFFIX, model_dir,
                       n > 0 && model_dir[n - 1] == '/' ? "" : "/", (long long)step);
    if (len < 0 || (size_t)len >= cap)
        return tl_error(TL_EINVAL, "checkpoint path: a buffer of %zu bytes is too small for %d", cap, len + 1);
    return TL_OK;
}

static char *ckpt_file(const char *dir, int64_t step)
{
    size_t n = strlen(dir);
    return tl_asprintf("%s%s" NAME_HEAD "%lld" TL_CKPT_SUFFIX, dir, n > 0 && dir[n - 1] == '/' ? "" : "/",
                       (long long)step);
}

/* The step of "<digits><tail>" at s: canonical decimal (no sign, no leading
 * zero but "0"), then exactly tail. */
static bool digits_then(const char *s, const char *tail, int64_t *step)
{
    size_t d = 0;
    while (s[d] >= '0' && s[d] <= '9')
        d++;
    if (d == 0 || d > 18 || (d > 1 && s[0] == '0') || strcmp(s + d, tail) != 0)
        return false;
    int64_t v = 0;
    for (size_t i = 0; i < d; i++)
        v = v * 10 + (s[i] - '0');
    *step = v;
    return true;
}

/* "model.ckpt-<step>.safetensors" */
static bool file_step(const char *name, int64_t *step)
{
    return strncmp(name, NAME_HEAD, sizeof NAME_HEAD - 1) == 0 &&
           digits_then(name + sizeof NAME_HEAD - 1, TL_CKPT_SUFFIX, step);
}

/* A prefix of the index, "model.ckpt-<step>" or ".../model.ckpt-<step>". */
static bool prefix_step(const char *prefix, int64_t *step)
{
    const char *base = strrchr(prefix, '/');
    base = base ? base + 1 : prefix;
    return strncmp(base, NAME_HEAD, sizeof NAME_HEAD - 1) == 0 && digits_then(base + sizeof NAME_HEAD - 1, "", step);
}

/* Canonical or zero-padded decimal of at most 9 digits at *s, advanced. */
static bool small_number(const char **s, int *v)
{
    int d = 0, x = 0;
    while ((*s)[d] >= '0' && (*s)[d] <= '9' && d < 10) {
        x = x * 10 + ((*s)[d] - '0');
        d++;
    }
    if (d == 0 || d > 9)
        return false;
    *s += d;
    *v = x;
    return true;
}

/* "model.ckpt-<step>.host-<host>-of-<count>.safetensors" */
static bool host_file_step(const char *name, int64_t *step, int *host, int *count)
{
    if (strncmp(name, NAME_HEAD, sizeof NAME_HEAD - 1) != 0)
        return false;
    const char *p = name + sizeof NAME_HEAD - 1, *infix = strstr(p, TL_CKPT_HOST_INFIX);
    if (infix == NULL || infix == p || (size_t)(infix - p) > 18)
        return false;
    char digits[20];
    memcpy(digits, p, (size_t)(infix - p));
    digits[infix - p] = '\0';
    if (!digits_then(digits, "", step))
        return false;
    p = infix + sizeof TL_CKPT_HOST_INFIX - 1;
    if (!small_number(&p, host) || strncmp(p, "-of-", 4) != 0)
        return false;
    p += 4;
    return small_number(&p, count) && strcmp(p, TL_CKPT_SUFFIX) == 0 && *host < *count;
}

tl_status tl_ckpt_host_path(const char *ckpt_path, int host, int num_hosts, char *buf, size_t cap)
{
    if (num_hosts < 1 || num_hosts > TL_CKPT_MAX_HOST_FILES)
        return tl_error(TL_EINVAL, "host files: the count must be in [1, %d], got %d", TL_CKPT_MAX_HOST_FILES,
                        num_hosts);
    if (host < 0 || host >= num_hosts)
        return tl_error(TL_EINVAL, "host file %d of %d: must be in [0, %d)", host, num_hosts, num_hosts);
    size_t n = strlen(ckpt_path), sn = sizeof TL_CKPT_SUFFIX - 1;
    if (n >= sn && strcmp(ckpt_path + n - sn, TL_CKPT_SUFFIX) == 0)
        n -= sn;
    int len = snprintf(buf, cap, "%.*s" TL_CKPT_HOST_INFIX "%05d-of-%05d" TL_CKPT_SUFFIX, (int)n, ckpt_path, host,
                       num_hosts);
    if (len < 0 || (size_t)len >= cap)
        return tl_error(TL_EINVAL, "host file path: a buffer of %zu bytes is too small for %d", cap, len + 1);
    return TL_OK;
}

/* Metadata key of host file hr (path hp) must read want; else the error. */
static tl_status host_meta_is(const tl_ckpt_reader *hr, const char *key, const char *want, const char *main,
                              int s, int n, const char *hp)
{
    const char *got = tl_ckpt_meta(hr, key);
    if (got != NULL && strcmp(got, want) == 0)
        return TL_OK;
    return tl_error(TL_EPARSE, "checkpoint %s is incomplete: host file %d of %d: %s: __metadata__ %s is %s%.64s%s, "
                               "the checkpoint needs \"%.64s\" (a host file of another save)", main, s, n, hp, key,
                    got ? "\"" : "", got ? got : "missing", got ? "\"" : "", want);
}

tl_status tl_ckpt_check_host_files(const char *ckpt_path, const tl_ckpt_reader *r, unsigned flags, int *num_files)
{
    *num_files = 0;
    const char *ms = tl_ckpt_meta(r, TL_CKPT_META_HOST_FILES);
    if (ms == NULL)
        return TL_OK;
    int64_t n;
    if (tl_parse_int64(ms, &n) != 0 || n < 1 || n > TL_CKPT_MAX_HOST_FILES)
        return tl_error(TL_EPARSE, "checkpoint %s: __metadata__ " TL_CKPT_META_HOST_FILES " is \"%.64s\"; it must be "
                                   "a count of host files in [1, %d]", ckpt_path, ms, TL_CKPT_MAX_HOST_FILES);
    const char *step = tl_ckpt_meta(r, "step"), *strategy = tl_ckpt_meta(r, TL_CKPT_META_TABLE_SHARDING);
    size_t cap = strlen(ckpt_path) + 64;
    char *sp = tl_malloc(cap);
    if (sp == NULL)
        return tl_error_oom();
    tl_status st = TL_OK;
    for (int s = 0; s < (int)n && st == TL_OK; s++) {
        if ((st = tl_ckpt_host_path(ckpt_path, s, (int)n, sp, cap)) != TL_OK)
            break;
        tl_ckpt_reader *sr;
        if ((st = tl_ckpt_open(sp, flags, &sr)) != TL_OK) {
            if (st != TL_ENOMEM)
                st = tl_error(TL_EPARSE, "checkpoint %s is incomplete: host file %d of %d: %s", ckpt_path, s,
                              (int)n, tl_last_error());
            break;
        }
        char num[24];
        snprintf(num, sizeof num, "%d", s);
        st = host_meta_is(sr, TL_CKPT_META_HOST_FILE, num, ckpt_path, s, (int)n, sp);
        if (st == TL_OK)
            st = host_meta_is(sr, TL_CKPT_META_HOST_FILES, ms, ckpt_path, s, (int)n, sp);
        if (st == TL_OK && step != NULL)
            st = host_meta_is(sr, "step", step, ckpt_path, s, (int)n, sp);
        if (st == TL_OK && strategy != NULL)
            st = host_meta_is(sr, TL_CKPT_META_TABLE_SHARDING, strategy, ckpt_path, s, (int)n, sp);
        tl_ckpt_close(sr);
    }
    tl_free(sp);
    if (st == TL_OK)
        *num_files = (int)n;
    return st;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* A temporary file of ours (a checkpoint's, the index's or the estimator's
 * config.json's) whose writer is dead: a crash in the middle of a write left
 * it. */
static bool stale_temp(const char *name)
{
    long pid;
    if (!tl_io_is_temp_name(name, &pid) || pid <= 0 || pid == (long)getpid())
        return false;
    int64_t step;
    size_t base = (size_t)(strstr(name, ".tmp-") - name);
    char head[256];
    if (base >= sizeof head)
        return false;
    memcpy(head, name, base);
    head[base] = '\0';
    int host, count;
    /* A host file's too: the manager looks only while no host writes one
     * (the estimator creates it after every host's file of its first save). */
    if (strcmp(head, TL_CKPT_INDEX_NAME) != 0 && strcmp(head, "config.json") != 0 && !file_step(head, &step) &&
        !host_file_step(head, &step, &host, &count))
        return false;
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

/* The checkpoint steps in dir, ascending; with clean, stale temporary files
 * are removed on the way. */
static tl_status scan_dir(const char *dir, bool clean, int64_t **steps, int *count)
{
    *steps = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (d == NULL) {
        int e = errno;
        if (e == ENOENT)
            return tl_error(TL_ENOTFOUND, "model_dir %s does not exist", dir);
        return tl_error(TL_EIO, "model_dir %s: cannot list: %s", dir, strerror(e));
    }
    int64_t *v = NULL;
    int n = 0, cap = 0;
    tl_status st = TL_OK;
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (de == NULL) {
            if (errno != 0)
                st = tl_error(TL_EIO, "model_dir %s: cannot list: %s", dir, strerror(errno));
            break;
        }
        int64_t step;
        if (file_step(de->d_name, &step)) {
            if (n == cap) {
                int ncap = cap ? 2 * cap : 16;
                int64_t *nv = tl_realloc(v, (size_t)ncap * sizeof *nv);
                if (nv == NULL) {
                    st = tl_error_oom();
                    break;
                }
                v = nv;
                cap = ncap;
            }
            v[n++] = step;
        } else if (clean && stale_temp(de->d_name)) {
            char *p = tl_asprintf("%s/%s", dir, de->d_name);
            if (p == NULL) {
                st = tl_error_oom();
                break;
            }
            if (tl_io_unlink(p) == TL_OK)
                tl_log(TL_LOG_INFO, "removed %s, left by a write that did not finish", p);
            tl_free(p);
        }
    }
    closedir(d);
    if (st != TL_OK) {
        tl_free(v);
        return st;
    }
    if (n > 1)
        qsort(v, (size_t)n, sizeof *v, cmp_i64);
    *steps = v;
    *count = n;
    return TL_OK;
}

tl_status tl_ckpt_list(const char *model_dir, int64_t **steps, int *count)
{
    return scan_dir(model_dir, false, steps, count);
}

void tl_ckpt_free_steps(int64_t *steps)
{
    tl_free(steps);
}

tl_status tl_ckpt_latest_valid(const char *model_dir, unsigned flags, tl_ckpt_reader **out, int64_t *step)
{
    *out = NULL;
    *step = -1;
    int64_t *steps;
    int n;
    /* The directory, not the index, is the authority: a crash between a
     * checkpoint's rename and the index's leaves a complete newer file that
     * the index does not list yet. */
    tl_status st = scan_dir(model_dir, false, &steps, &n);
    if (st != TL_OK)
        return st;
    if (n == 0) {
        tl_free(steps);
        return tl_error(TL_ENOTFOUND, "no checkpoint in %s", model_dir);
    }
    char first_err[1024] = "";
    for (int i = n - 1; i >= 0; i--) {
        char *path = ckpt_file(model_dir, steps[i]);
        if (path == NULL) {
            tl_free(steps);
            return tl_error_oom();
        }
        tl_ckpt_reader *r = NULL;
        st = tl_ckpt_open(path, flags, &r);
        if (st == TL_OK) {
            const char *ms = tl_ckpt_meta(r, "step");
            int64_t v;
            if (ms != NULL && (tl_parse_int64(ms, &v) != 0 || v != steps[i])) {
                st = tl_error(TL_EPARSE, "%s: __metadata__ step '%s' but the file name says %lld", path, ms,
                              (long long)steps[i]);
                tl_ckpt_close(r);
                r = NULL;
            }
        }
        int files;
        if (st == TL_OK && (st = tl_ckpt_check_host_files(path, r, flags, &files)) != TL_OK) {
            tl_ckpt_close(r);
            r = NULL;
        }
        tl_free(path);
        if (st == TL_OK) {
            *out = r;
            *step = steps[i];
            tl_free(steps);
            return TL_OK;
        }
        if (st == TL_ENOMEM) {
            tl_free(steps);
            return st;
        }
        if (first_err[0] == '\0')
            snprintf(first_err, sizeof first_err, "%s", tl_last_error());
        tl_log(TL_LOG_WARN, "%s; %s", tl_last_error(),
               i > 0 ? "falling back to the previous checkpoint" : "no earlier checkpoint to fall back to");
    }
    tl_free(steps);
    return tl_error(TL_EPARSE, "none of the %d checkpoint%s in %s is valid; the newest: %s", n, n == 1 ? "" : "s",
                    model_dir, first_err);
}

/* ======================================================================== */
/* The manager                                                              */
/* ======================================================================== */

/* The manager is TF 1's Saver (saver.py), as Estimator builds it:
 *
 *   steps/times   _last_checkpoints: the checkpoints a save may retire,
 *                 oldest first. With keep_checkpoint_max 0 (TF: None or 0)
 *                 _RecordLastCheckpoint returns at once, so the list stays
 *                 what was recovered at the start and nothing is deleted.
 *   listed        what the index's all_model_checkpoint_paths says:
 *                 _last_checkpoints plus the latest when it is not their
 *                 last (generate_checkpoint_state_proto appends it) — with
 *                 keep_checkpoint_max 0 and a fresh directory, the latest
 *                 alone.
 *   next_keep_time  _next_checkpoint_time: when the saver was built plus
 *                 keep_checkpoint_every_n_hours. A checkpoint that leaves
 *                 the list after it stays on disk (unlisted) and the time
 *                 moves on by the same hours. None is a SaverDef field left
 *                 unset, 0 hours: every checkpoint written since the saver
 *                 was built stays (TF 2.15 keeps model.ckpt-0 so), and only
 *                 ones recovered from before it are deleted.
 *
 * One difference, deliberate: TF retires one checkpoint per save, so a
 * list recovered longer than keep_checkpoint_max (the option lowered
 * between runs) stays that long; here it shrinks to the maximum at once. */
struct tl_ckpt_manager {
    char *dir;
    int64_t keep_max;
    double keep_hours;     /* 0 for None */
    bool hours_none;
    double (*clock)(void *ud);
    void *clock_ud;
    int n, cap;
    int64_t *steps; /* (n) _last_checkpoints, oldest first */
    double *times;  /* (n) when each was written, seconds since the Epoch */
    int nlisted;
    int64_t *listed;       /* (nlisted) the index's paths, oldest first */
    double next_keep_time; /* TF's _next_checkpoint_time */
    tl_status failed;      /* sticky: the status of a failed save */
    char *fail_msg;
};

static double system_clock(void *ud)
{
    (void)ud;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void tl_ckpt_manager_options_init(tl_ckpt_manager_options *o)
{
    memset(o, 0, sizeof *o);
    o->keep_checkpoint_max = 5;
    o->keep_checkpoint_every_n_hours = 10000;
}

/* Appends (step, time), first dropping an entry of the same step. */
static tl_status list_put(tl_ckpt_manager *m, int64_t step, double t)
{
    for (int i = 0; i < m->n; i++)
        if (m->steps[i] == step) {
            memmove(m->steps + i, m->steps + i + 1, (size_t)(m->n - i - 1) * sizeof *m->steps);
            memmove(m->times + i, m->times + i + 1, (size_t)(m->n - i - 1) * sizeof *m->times);
            m->n--;
            break;
        }
    if (m->n == m->cap) {
        int ncap = m->cap ? 2 * m->cap : 16;
        int64_t *ns = tl_realloc(m->steps, (size_t)ncap * sizeof *ns);
        if (ns != NULL)
            m->steps = ns;
        double *nt = ns ? tl_realloc(m->times, (size_t)ncap * sizeof *nt) : NULL;
        if (nt != NULL)
            m->times = nt;
        if (ns == NULL || nt == NULL)
            return tl_error_oom();
        m->cap = ncap;
    }
    m->steps[m->n] = step;
    m->times[m->n++] = t;
    return TL_OK;
}

/* Whether step's file exists, and its mtime. */
static tl_status file_mtime(const char *dir, int64_t step, bool *found, double *t)
{
    *found = false;
    char *p = ckpt_file(dir, step);
    if (p == NULL)
        return tl_error_oom();
    struct stat sb;
    if (stat(p, &sb) == 0 && S_ISREG(sb.st_mode)) {
        *found = true;
        *t = (double)sb.st_mtim.tv_sec + sb.st_mtim.tv_nsec * 1e-9;
    }
    tl_free(p);
    return TL_OK;
}

/* The kept list after a restart: the index's checkpoints whose files exist
 * (TF's recover_last_checkpoints), then files newer than all of them. */
static tl_status recover(tl_ckpt_manager *m)
{
    tl_ckpt_state *s = NULL;
    tl_status st = tl_ckpt_state_read(m->dir, &s);
    if (st == TL_ENOMEM)
        return st;
    if (st != TL_OK && st != TL_ENOTFOUND)
        tl_log(TL_LOG_WARN, "%s; recovering the list of checkpoints from the directory", tl_last_error());
    int64_t newest = -1;
    if (st == TL_OK) {
        bool only_latest = s->num_paths == 0;
        int np = only_latest ? 1 : s->num_paths;
        for (int i = 0; i < np && st == TL_OK; i++) {
            const char *p = only_latest ? s->model_checkpoint_path : s->all_model_checkpoint_paths[i];
            int64_t step;
            double mt;
            if (!prefix_step(p, &step)) {
                tl_log(TL_LOG_WARN, "%s/" TL_CKPT_INDEX_NAME ": '%s' is not a tpuloop checkpoint name; ignored",
                       m->dir, p);
                continue;
            }
            bool found;
            st = file_mtime(m->dir, step, &found, &mt);
            if (st != TL_OK || !found)
                continue; /* deleted since: TF's recovery skips it too */
            double t = s->num_timestamps == s->num_paths && !only_latest ? s->all_model_checkpoint_timestamps[i] : mt;
            st = list_put(m, step, t);
            if (step > newest)
                newest = step;
        }
    }
    tl_ckpt_state_destroy(s);
    if (st != TL_OK && st != TL_ENOTFOUND && st != TL_EPARSE && st != TL_EIO)
        return st;
    int64_t *steps;
    int n;
    st = scan_dir(m->dir, true, &steps, &n);
    for (int i = 0; i < n && st == TL_OK; i++) {
        double mt;
        bool found = false;
        if (steps[i] > newest)
            st = file_mtime(m->dir, steps[i], &found, &mt);
        if (st == TL_OK && found)
            st = list_put(m, steps[i], mt);
    }
    tl_free(steps);
    return st;
}

tl_status tl_ckpt_manager_create(const char *model_dir, const tl_ckpt_manager_options *o, tl_ckpt_manager **out)
{
    *out = NULL;
    tl_ckpt_manager_options defaults;
    tl_ckpt_manager_options_init(&defaults);
    if (o == NULL)
        o = &defaults;
    if (model_dir == NULL)
        return tl_error(TL_EINVAL, "model_dir is NULL");
    if (o->keep_checkpoint_max < 0)
        return tl_error(TL_EINVAL, "keep_checkpoint_max must be >= 0 (0 keeps all), got %lld",
                        (long long)o->keep_checkpoint_max);
    double hours = o->keep_checkpoint_every_n_hours;
    if (!(hours > 0) && !(hours < 0))
        return tl_error(TL_EINVAL, "keep_checkpoint_every_n_hours should be > 0 (got %g), or negative for None", hours);
    struct stat sb;
    if (stat(model_dir, &sb) != 0)
        return tl_error(errno == ENOENT ? TL_ENOTFOUND : TL_EIO, "model_dir %s: %s", model_dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return tl_error(TL_EIO, "model_dir %s is not a directory", model_dir);

    tl_ckpt_manager *m = tl_calloc(1, sizeof *m);
    if (m == NULL)
        return tl_error_oom();
    m->dir = tl_strdup(model_dir);
    if (m->dir == NULL) {
        tl_free(m);
        return tl_error_oom();
    }
    m->keep_max = o->keep_checkpoint_max;
    m->hours_none = hours < 0;
    m->keep_hours = m->hours_none ? 0 : hours;
    m->clock = o->clock ? o->clock : system_clock;
    m->clock_ud = o->clock ? o->clock_ud : NULL;
    m->next_keep_time = m->clock(m->clock_ud) + m->keep_hours * 3600;
    tl_status st = recover(m);
    if (st == TL_OK) {
        m->listed = tl_alloc_array((size_t)m->n + 1, sizeof *m->listed);
        if (m->listed == NULL)
            st = tl_error_oom();
        else if (m->n > 0)
            memcpy(m->listed, m->steps, (size_t)m->n * sizeof *m->steps);
        m->nlisted = m->n;
    }
    if (st != TL_OK) {
        tl_ckpt_manager_destroy(m);
        return st;
    }
    *out = m;
    return TL_OK;
}

void tl_ckpt_manager_destroy(tl_ckpt_manager *m)
{
    if (m == NULL)
        return;
    tl_free(m->dir);
    tl_free(m->steps);
    tl_free(m->times);
    tl_free(m->listed);
    tl_free(m->fail_msg);
    tl_free(m);
}

const int64_t *tl_ckpt_manager_steps(const tl_ckpt_manager *m, int *count)
{
    *count = m->nlisted;
    return m->listed;
}

static tl_status fail(tl_ckpt_manager *m, tl_status st)
{
    m->failed = st;
    tl_free(m->fail_msg);
    m->fail_msg = tl_strdup(tl_last_error());
    return st;
}

/* Deletes host files of dir: with only_step >= 0, every one of that step
 * (its checkpoint was retired); else those no main file commits — step's
 * with another count than count, and any step's without a main file (a
 * save that never committed). A failed delete is a warning. */
static void remove_host_files(const char *dir, int64_t only_step, int64_t step, int count)
{
    DIR *d = opendir(dir);
    if (d == NULL) {
        tl_log(TL_LOG_WARN, "model_dir %s: cannot list to remove host files: %s", dir, strerror(errno));
        return;
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        int64_t s;
        int host, n;
        if (!host_file_step(de->d_name, &s, &host, &n))
            continue;
        bool drop;
        const char *why;
        if (only_step >= 0) {
            drop = s == only_step;
            why = "its checkpoint was deleted";
        } else if (s == step) {
            drop = n != count;
            why = "a host file of another save of this step";
        } else {
            char *main = ckpt_file(dir, s);
            struct stat sb;
            drop = main != NULL && stat(main, &sb) != 0 && errno == ENOENT;
            why = "a host file of a save that never committed";
            tl_free(main);
        }
        if (!drop)
            continue;
        char *p = tl_asprintf("%s/%s", dir, de->d_name);
        tl_status st = p ? tl_io_unlink(p) : tl_error_oom();
        if (st == TL_OK && only_step < 0)
            tl_log(TL_LOG_INFO, "removed %s: %s", p, why);
        else if (st != TL_OK && st != TL_ENOTFOUND)
            tl_log(TL_LOG_WARN, "%s (ignored: the host file stays on disk)", tl_last_error());
        tl_free(p);
    }
    closedir(d);
}

/* The index for the list steps[0..n): every one listed, the last latest. */
static tl_status write_index(const tl_ckpt_manager *m, const int64_t *steps, const double *times, int n)
{
    tl_ckpt_state s = {0};
    char **paths = tl_calloc((size_t)n + 1, sizeof *paths);
    tl_status st = paths ? TL_OK : tl_error_oom();
    for (int i = 0; i < n && st == TL_OK; i++) {
        paths[i] = tl_asprintf(NAME_HEAD "%lld", (long long)steps[i]);
        if (paths[i] == NULL)
            st = tl_error_oom();
    }
    if (st == TL_OK) {
        s.model_checkpoint_path = paths[n - 1];
        s.num_paths = n;
        s.all_model_checkpoint_paths = paths;
        s.num_timestamps = n;
        s.all_model_checkpoint_timestamps = (double *)times;
        st = tl_ckpt_state_write(m->dir, &s);
    }
    for (int i = 0; paths && i < n; i++)
        tl_free(paths[i]);
    tl_free(paths);
    return st;
}

tl_status tl_ckpt_manager_save(tl_ckpt_manager *m, tl_ckpt_writer *w, int64_t step)
{
    if (m->failed != TL_OK)
        return tl_error(m->failed, "%s: an earlier checkpoint save failed, so this manager saves no more (a new "
                                   "manager recovers from the directory): %s",
                        m->dir, m->fail_msg ? m->fail_msg : "");
    if (step < 0)
        return tl_error(TL_EINVAL, "checkpoint step must be >= 0, got %lld", (long long)step);
    char sbuf[24];
    snprintf(sbuf, sizeof sbuf, "%lld", (long long)step);
    tl_status st = tl_ckpt_writer_set_meta(w, "step", sbuf);
    if (st != TL_OK)
        return st;
    const char *ms = tl_ckpt_writer_meta_get(w, TL_CKPT_META_HOST_FILES);
    int64_t v;
    int hosts = ms != NULL && tl_parse_int64(ms, &v) == 0 && v > 0 && v <= TL_CKPT_MAX_HOST_FILES ? (int)v : 0;
    char *path = ckpt_file(m->dir, step);
    if (path == NULL)
        return tl_error_oom();
    st = tl_ckpt_writer_write(w, path);
    tl_free(path);
    if (st != TL_OK)
        return fail(m, st);

    /* The new lists, on copies: m changes only once the index is durable.
     * next is _last_checkpoints after _RecordLastCheckpoint, with the
     * latest at its end (appended there when the list is frozen). */
    tl_ckpt_manager next = *m;
    next.steps = tl_alloc_array((size_t)m->n + 1, sizeof *next.steps);
    next.times = tl_alloc_array((size_t)m->n + 1, sizeof *next.times);
    next.cap = m->n + 1;
    if (next.steps == NULL || next.times == NULL) {
        tl_free(next.steps);
        tl_free(next.times);
        return fail(m, tl_error_oom());
    }
    if (m->n > 0) {
        memcpy(next.steps, m->steps, (size_t)m->n * sizeof *m->steps);
        memcpy(next.times, m->times, (size_t)m->n * sizeof *m->times);
    }
    double now = m->clock(m->clock_ud);
    bool frozen = m->keep_max == 0;
    if (frozen) {
        if (next.n == 0 || next.steps[next.n - 1] != step) {
            next.steps[next.n] = step;
            next.times[next.n++] = now;
        }
    } else {
        st = list_put(&next, step, now); /* fits: cap is n + 1 */
        TL_ASSERT(st == TL_OK);
    }
    int drop = !frozen && next.n > m->keep_max ? next.n - (int)m->keep_max : 0;
    int64_t *listed = tl_alloc_array((size_t)(next.n - drop) + 1, sizeof *listed);
    st = listed != NULL ? write_index(m, next.steps + drop, next.times + drop, next.n - drop) : tl_error_oom();
    if (st != TL_OK) {
        tl_free(listed);
        tl_free(next.steps);
        tl_free(next.times);
        return fail(m, st);
    }

    /* Both are durable: retire what fell out, oldest first (TF 1's rule). */
    for (int i = 0; i < drop; i++) {
        if (next.times[i] > m->next_keep_time) {
            m->next_keep_time += m->keep_hours * 3600;
            char hours[32];
            if (m->hours_none)
                snprintf(hours, sizeof hours, "None");
            else
                snprintf(hours, sizeof hours, "%g", m->keep_hours);
            tl_log(TL_LOG_INFO, "%s/" NAME_HEAD "%lld" TL_CKPT_SUFFIX " kept (keep_checkpoint_every_n_hours=%s)",
                   m->dir, (long long)next.steps[i], hours);
            continue;
        }
        char *p = ckpt_file(m->dir, next.steps[i]);
        tl_status dst = p ? tl_io_unlink(p) : tl_error_oom();
        if (dst != TL_OK && dst != TL_ENOTFOUND)
            tl_log(TL_LOG_WARN, "%s (ignored: the checkpoint stays on disk)", tl_last_error());
        else /* the main file first: a crash between leaves host files of no checkpoint, removed later */
            remove_host_files(m->dir, next.steps[i], -1, 0);
        tl_free(p);
    }
    remove_host_files(m->dir, -1, step, hosts);
    /* What the index lists is what m now reports. */
    memcpy(listed, next.steps + drop, (size_t)(next.n - drop) * sizeof *listed);
    tl_free(m->listed);
    m->listed = listed;
    m->nlisted = next.n - drop;
    if (frozen) {
        tl_free(next.steps);
        tl_free(next.times);
    } else {
        memmove(next.steps, next.steps + drop, (size_t)(next.n - drop) * sizeof *next.steps);
        memmove(next.times, next.times + drop, (size_t)(next.n - drop) * sizeof *next.times);
        tl_free(m->steps);
        tl_free(m->times);
        m->steps = next.steps;
        m->times = next.times;
        m->n = next.n - drop;
        m->cap = next.cap;
    }
    return TL_OK;
}
