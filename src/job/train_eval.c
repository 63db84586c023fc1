/* train_eval.c — tl_job_train_and_evaluate: TensorFlow's
 * train_and_evaluate run locally (_TrainingExecutor.run_local). Training
 * saves checkpoints as usual; a CheckpointSaverListener
 * (_NewCheckpointListenerForEvaluate) evaluates a new checkpoint when its
 * timer says so — throttle_secs since the last evaluation, or tpuloop's
 * eval_every_n_steps, for which the estimator also saves every that many
 * steps — skipping the save of the starting state; after training, the
 * final checkpoint is evaluated unless it just was. The evaluation runs on
 * the estimator between two training loops, on the parameters just saved,
 * so training goes on with the same bits. With best_exporter, each
 * evaluation whose loss is below every earlier one (those in model_dir/eval
 * from earlier runs included) keeps its checkpoint in model_dir/export/best,
 * the newest exports_to_keep of them (BestExporter). */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "job_int.h"

static double now_secs(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* SecondOrStepTimer.should_trigger_for_step: always the first time, never
 * twice for a step, then every_steps or every_secs after the last trigger. */
static bool should_trigger(const tl_job_tae *t, int64_t step, double now)
{
    if (!t->triggered)
        return true;
    if (step == t->last_step)
        return false;
    if (t->every_steps > 0)
        return step >= t->last_step + t->every_steps;
    return now >= t->last_time + (double)t->every_secs;
}

/* The files dir/name_pattern matches into *g (none: gl_pathc 0). */
static tl_status list_files(const char *dir, const char *name_pattern, glob_t *g)
{
    char pattern[4400];
    memset(g, 0, sizeof *g);
    if (snprintf(pattern, sizeof pattern, "%s/%s", dir, name_pattern) >= (int)sizeof pattern)
        return tl_error(TL_EINVAL, "best_exporter: the path is too long: %s", dir);
    int rc = glob(pattern, 0, NULL, g);
    if (rc == GLOB_NOMATCH)
        return TL_OK;
    return rc == 0 ? TL_OK : tl_error(TL_EIO, "best_exporter: cannot list %s", pattern);
}

/* The lowest "loss" of the evaluations model_dir/eval holds (earlier runs'),
 * as BestExporter reads its event files. *known false when there is none. */
static tl_status best_so_far(const char *model_dir, double *best, bool *known)
{
    char dir[4200];
    *known = false;
    if (snprintf(dir, sizeof dir, "%s/eval", model_dir) >= (int)sizeof dir)
        return tl_error(TL_EINVAL, "model_dir is too long: %s", model_dir);
    glob_t g;
    tl_status st = list_files(dir, "events.out.tfevents.*", &g);
    if (st != TL_OK || g.gl_pathc == 0)
        return st;
    for (size_t i = 0; i < g.gl_pathc && st == TL_OK; i++) {
        tl_summary_reader *r;
        if ((st = tl_summary_reader_open(g.gl_pathv[i], &r)) != TL_OK)
            break;
        const tl_event *ev;
        while ((st = tl_summary_reader_next(r, &ev)) == TL_OK && ev != NULL)
            for (size_t k = 0; k < ev->num_values; k++)
                if (ev->values[k].has_simple_value && strcmp(ev->values[k].tag, "loss") == 0 &&
                    (!*known || ev->values[k].simple_value < *best)) {
                    *best = ev->values[k].simple_value;
                    *known = true;
                }
        tl_summary_reader_close(r);
    }
    globfree(&g);
    return st;
}

static tl_status mkdir_p(const char *dir)
{
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return tl_error(TL_EIO, "best_exporter: cannot create %s: %s", dir, strerror(errno));
    return TL_OK;
}

/* Copies src to dst through a temporary file renamed into place, so an
 * export is whole or absent. A hard link first: the same bytes, no copy. */
static tl_status copy_file(const char *src, const char *dst)
{
    char tmp[4400];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", dst) >= (int)sizeof tmp)
        return tl_error(TL_EINVAL, "best_exporter: the path is too long: %s", dst);
    unlink(tmp);
    if (link(src, tmp) != 0) {
        FILE *in = fopen(src, "rb"), *out = in != NULL ? fopen(tmp, "wb") : NULL;
        char buf[1 << 16];
        size_t n;
        bool ok = in != NULL && out != NULL;
        while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0)
            ok = fwrite(buf, 1, n, out) == n;
        ok = ok && !ferror(in);
        if (out != NULL && (fflush(out) != 0 || fsync(fileno(out)) != 0))
            ok = false;
        if (in != NULL)
            fclose(in);
        if (out != NULL && fclose(out) != 0)
            ok = false;
        if (!ok) {
            int err = errno;
            unlink(tmp);
            return tl_error(TL_EIO, "best_exporter: cannot copy %s to %s: %s", src, dst, strerror(err));
        }
    }
    if (rename(tmp, dst) != 0) {
        int err = errno;
        unlink(tmp);
        return tl_error(TL_EIO, "best_exporter: cannot rename %s to %s: %s", tmp, dst, strerror(err));
    }
    return TL_OK;
}

/* The exports' steps in export/best, newest first beyond keep removed. */
static tl_status prune_exports(const char *dir, int64_t keep)
{
    glob_t g;
    tl_status st = list_files(dir, "model.ckpt-*.safetensors", &g);
    if (st != TL_OK || g.gl_pathc == 0)
        return st;
    /* glob sorts by name; order by step (model.ckpt-<step>.safetensors). */
    int64_t *steps = calloc(g.gl_pathc + 1, sizeof *steps);
    if (steps == NULL) {
        globfree(&g);
        return tl_error(TL_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < g.gl_pathc; i++) {
        const char *p = strrchr(g.gl_pathv[i], '-');
        steps[i] = p != NULL ? strtoll(p + 1, NULL, 10) : -1;
    }
    for (size_t i = 0; i < g.gl_pathc; i++) {
        int64_t newer = 0; /* exports with a larger step */
        for (size_t j = 0; j < g.gl_pathc; j++)
            newer += steps[j] > steps[i];
        if (newer >= keep && unlink(g.gl_pathv[i]) != 0 && errno != ENOENT)
            st = tl_error(TL_EIO, "best_exporter: cannot remove %s: %s", g.gl_pathv[i], strerror(errno));
    }
    free(steps);
    globfree(&g);
    return st;
}

/* BestExporter.export: keeps the checkpoint when its loss is the lowest. */
static tl_status export_best(tl_job *job, const tl_job_evaluation *ev)
{
    tl_job_tae *t = &job->tae;
    double loss = ev->result.loss;
    if (!isfinite(loss) || (t->best_known && !(loss < t->best_loss)))
        return TL_OK;
    const char *md = job->r->model_dir, *base = strrchr(ev->checkpoint, '/');
    char dir[4200], dst[4300];
    if (snprintf(dst, sizeof dst, "%s/export/best/%s", md, base != NULL ? base + 1 : ev->checkpoint) >=
        (int)sizeof dst)
        return tl_error(TL_EINVAL, "best_exporter: the path is too long under %s", md);
    snprintf(dir, sizeof dir, "%s/export", md);
    tl_status st = mkdir_p(dir);
    snprintf(dir, sizeof dir, "%s/export/best", md);
    if (st == TL_OK)
        st = mkdir_p(dir);
    if (st == TL_OK)
        st = copy_file(ev->checkpoint, dst);
    if (st == TL_OK)
        st = prune_exports(dir, job->r->exports_to_keep);
    if (st != TL_OK)
        return st;
    t->best_known = true;
    t->best_loss = loss;
    snprintf(t->best_path, sizeof t->best_path, "%s", dst);
    tl_log(TL_LOG_INFO, "best_exporter: step %lld, loss %g: exported %s", (long long)ev->result.global_step, loss,
           dst);
    return TL_OK;
}

/* Evaluates the parameters just saved in checkpoint: the listener's
 * _evaluate, then the exporter. */
static tl_status evaluate_saved(tl_job *job, int64_t step, const char *checkpoint)
{
    tl_job_tae *t = &job->tae;
    t->triggered = true;
    t->last_step = step;
    t->last_time = now_secs();
    tl_job_evaluation *ev = &t->last;
    tl_status st = tl_job_evaluate_params(job, ev);
    if (st != TL_OK)
        return st;
    snprintf(ev->checkpoint, sizeof ev->checkpoint, "%s", checkpoint);
    t->count++;
    if (!tl_job_host0(job)) /* host 0 reports and exports */
        return TL_OK;
    if (job->opt.on_evaluation != NULL)
        job->opt.on_evaluation(ev, job->opt.user);
    return job->r->best_exporter ? export_best(job, ev) : TL_OK;
}

tl_status tl_job_after_save(tl_estimator *est, int64_t step, const char *checkpoint, void *user)
{
    (void)est;
    tl_job *job = user;
    tl_job_tae *t = &job->tae;
    if (!t->active)
        return TL_OK;
    if (t->first) { /* the save of the state training starts from */
        t->first = false;
        return TL_OK;
    }
    /* By host 0's clock: every host evaluates the same checkpoints. */
    int64_t go = should_trigger(t, step, now_secs());
    tl_comm *hosts = job->opt.hosts;
    tl_status st = hosts != NULL ? tl_comm_broadcast(hosts, tl_comm_first_rank(hosts), &go, 1, TL_COMM_I64, 0)
                                 : TL_OK;
    if (st != TL_OK)
        return st;
    if (!go) {
        tl_log(TL_LOG_INFO, "Skip the current checkpoint eval due to throttle secs (%lld secs).",
               (long long)t->every_secs);
        return TL_OK;
    }
    return evaluate_saved(job, step, checkpoint);
}

tl_status tl_job_train_and_evaluate(tl_job *job, tl_job_train_result *res, tl_job_evaluation *last)
{
    const tl_run_config *r = job->r;
    memset(last, 0, sizeof *last);
    memset(res, 0, sizeof *res);
    res->restored_from_step = -1;
    if (!job->opt.train_and_evaluate)
        return tl_error(TL_EINVAL, "tl_job_train_and_evaluate: the job was created without "
                                   "tl_job_options.train_and_evaluate");
    if (r->model_dir == NULL)
        return tl_error(TL_EINVAL, "train_and_evaluate evaluates the checkpoints training saves: set model_dir");
    if (!r->eval_batch_size.set)
        return tl_error(TL_EINVAL, "train_and_evaluate needs eval_batch_size (and, on the devices, eval_steps)");
    if (!r->eval_every_n_steps.set && r->throttle_secs <= 0)
        return tl_error(TL_EINVAL, "eval_spec.throttle_secs should be positive, given: %lld. It is used do determine "
                                   "how long each training iteration should go when train and evaluate locally.",
                        (long long)r->throttle_secs);
    tl_job_tae *t = &job->tae;
    memset(t, 0, sizeof *t);
    t->first = true;
    t->every_steps = r->eval_every_n_steps.set ? r->eval_every_n_steps.value : 0;
    t->every_secs = r->throttle_secs;
    tl_status st = r->best_exporter ? best_so_far(r->model_dir, &t->best_loss, &t->best_known) : TL_OK;
    if (st != TL_OK)
        return st;
    t->active = true;
    st = tl_job_train(job, res);
    t->active = false;
    if (st != TL_OK)
        return st;
    /* _NewCheckpointListenerForEvaluate.end: the final checkpoint, unless it
     * was the last evaluated. A stopped run was asked to end: nothing more. */
    int64_t gs = res->train.global_step;
    if (!res->train.stopped && (!t->triggered || t->last_step != gs)) {
        char path[4096];
        if ((st = tl_ckpt_path(r->model_dir, gs, path, sizeof path)) != TL_OK ||
            (st = evaluate_saved(job, gs, path)) != TL_OK)
            return st;
    }
    if (t->triggered)
        *last = t->last;
    return TL_OK;
}

int tl_job_evaluations(const tl_job *job)
{
    return job->tae.count;
}

const char *tl_job_best_export(const tl_job *job)
{
    return job->tae.best_path[0] != '\0' ? job->tae.best_path : NULL;
}
