/* ckpt_input.c — where the training input stands, restored from a
 * checkpoint when the training datasets open: one JSON array of the
 * invocations' positions in the main file (one host), or each
 * invocation's position from the one host file that holds it (several
 * hosts, checkpoint.c). */
#include <stdio.h>
#include <string.h>

#include "estimator_int.h"

/* The positions of a checkpoint of S host files (main: its main file) for
 * this host's invocations: each host file's "input_datasets", a JSON array
 * of one element per invocation, of which exactly one file's is not null.
 * Every host checks every invocation, so all reach the same verdict. */
static tl_status restore_host_positions(tl_estimator *est, const char *main, int S)
{
    const tl_input_plan *plan = est->infeed.plan[TL_MODE_TRAIN];
    size_t cap = strlen(main) + 64;
    char *what = tl_asprintf("checkpoint %s", main);
    char *hp = tl_malloc(cap);
    tl_ckpt_reader **rd = tl_calloc((size_t)S, sizeof *rd);
    tl_infeed_text **el = tl_calloc((size_t)S, sizeof *el);
    tl_infeed_text *pick = NULL;
    int n = -1, with = 0, without = -1;
    tl_status st = what && hp && rd && el ? TL_OK : tl_error_oom();
    char step[24];
    snprintf(step, sizeof step, "%lld", (long long)est->restored_step);
    for (int s = 0; s < S && st == TL_OK; s++) {
        char num[24], count[24], fwhat[4400];
        snprintf(num, sizeof num, "%d", s);
        snprintf(count, sizeof count, "%d", S);
        if ((st = tl_ckpt_host_path(main, s, S, hp, cap)) != TL_OK)
            break;
        snprintf(fwhat, sizeof fwhat, "%s: host file %s", what, hp);
        if ((st = tl_ckpt_open(hp, 0, &rd[s])) != TL_OK) {
            if (st != TL_ENOMEM)
                st = tl_error(TL_EINVAL, "%s: host file %d of %d: %s", what, s, S, tl_last_error());
            break;
        }
        static const char *const keys[] = {TL_CKPT_META_HOST_FILE, TL_CKPT_META_HOST_FILES, "step"};
        const char *want[] = {num, count, step};
        for (int k = 0; k < 3 && st == TL_OK; k++) {
            const char *got = tl_ckpt_meta(rd[s], keys[k]);
            if (got == NULL || strcmp(got, want[k]) != 0)
                st = tl_error(TL_EINVAL, "%s: __metadata__ %s is %.64s, the checkpoint needs %s (a host file of "
                                         "another save)", fwhat, keys[k], got ? got : "missing", want[k]);
        }
        tl_ckpt_tensor_info t;
        if (st != TL_OK)
            break;
        if (tl_ckpt_find(rd[s], TL_EST_INPUT_TENSOR, &t) != TL_OK) {
            tl_clear_error();
            if (without < 0)
                without = s;
            continue;
        }
        with++;
        if (t.dtype != TL_CKPT_U8 || t.rank != 1)
            st = tl_error(TL_EINVAL, "%s: tensor '" TL_EST_INPUT_TENSOR "' is %s of rank %d; the input positions are "
                                     "U8 [bytes]", fwhat, tl_ckpt_dtype_name(t.dtype), t.rank);
        else if (t.bytes > 0 && memchr(t.data, '\0', (size_t)t.bytes) != NULL)
            st = tl_error(TL_EINVAL, "%s: tensor '" TL_EST_INPUT_TENSOR "' holds a NUL byte; the input positions "
                                     "are JSON text", fwhat);
        int count_s;
        if (st == TL_OK &&
            (st = tl_infeed_split_positions(t.data, (size_t)t.bytes, fwhat, &el[s], &count_s)) == TL_OK &&
            count_s != plan->input_fn_calls)
            st = tl_error(TL_EINVAL, "%s holds the positions of %d input datasets; this input plan has %d invocations "
                                     "(the deployment or topology changed)", fwhat, count_s, plan->input_fn_calls);
        n = plan->input_fn_calls;
    }
    if (st == TL_OK && with > 0 && without >= 0 && tl_ckpt_host_path(main, without, S, hp, cap) == TL_OK)
        st = tl_error(TL_EINVAL, "%s: host file %s has no tensor '" TL_EST_INPUT_TENSOR "', and %d other host file%s "
                                 "of the checkpoint %s: every host of a run that reads input datasets saves its "
                                 "positions", what, hp, with, with == 1 ? "" : "s", with == 1 ? "has" : "have");
    if (st == TL_OK && with == 0) {
        tl_log(TL_LOG_WARN, "the restored checkpoint holds no input dataset positions: the input starts from the "
                            "beginning of its datasets");
    } else if (st == TL_OK) {
        if ((pick = tl_calloc((size_t)n + 1, sizeof *pick)) == NULL)
            st = tl_error_oom();
        for (int i = 0; i < n && st == TL_OK; i++) {
            int first = -1, holders = 0;
            for (int s = 0; s < S; s++)
                if (el[s][i].p != NULL && holders++ == 0)
                    first = s;
            if (holders == 1) {
                if (tl_est_local_call(est, &plan->calls[i]))
                    pick[i] = el[first][i];
                continue;
            }
            tl_strbuf sb = {0};
            for (int s = 0; s < S; s++)
                if ((holders == 0 || el[s][i].p != NULL) && tl_ckpt_host_path(main, s, S, hp, cap) == TL_OK)
                    tl_strbuf_appendf(&sb, "%s%s", sb.len ? ", " : "", hp);
            st = tl_error(TL_EINVAL, "%s: input dataset %d of %d has %s (%s); exactly one host file holds each "
                                     "invocation's position", what, i, n,
                          holders == 0 ? "no position in any of its host files, each null" : "a position in several "
                                                                                             "host files",
                          sb.data != NULL ? sb.data : "out of memory");
            tl_strbuf_free(&sb);
        }
        if (st == TL_OK)
            st = tl_infeed_restore_positions(est, what, pick, n);
    }
    for (int s = 0; rd != NULL && s < S; s++) {
        tl_ckpt_close(rd[s]);
        tl_free(el[s]);
    }
    tl_free(pick);
    tl_free(el);
    tl_free(rd);
    tl_free(hp);
    tl_free(what);
    return st;
}

/* The positions of a checkpoint that holds them itself (one host's). */
static tl_status restore_main_positions(tl_estimator *est, const char *main, const char *json)
{
    char *what = tl_asprintf("checkpoint %s", main);
    if (what == NULL)
        return tl_error_oom();
    tl_infeed_text *el;
    int n;
    tl_status st = tl_infeed_split_positions(json, strlen(json), what, &el, &n);
    if (st == TL_OK) {
        st = tl_infeed_restore_positions(est, what, el, n);
        tl_free(el);
    }
    tl_free(what);
    return st;
}

tl_status tl_est_restore_input(tl_estimator *est)
{
    if (!est->restored_pending)
        return TL_OK;
    est->restored_pending = false;
    tl_status st = TL_OK;
    if (est->restored_host_files > 0)
        st = restore_host_positions(est, est->restored_path, est->restored_host_files);
    else if (est->restored_input != NULL)
        st = restore_main_positions(est, est->restored_path, est->restored_input);
    else
        tl_log(TL_LOG_WARN, "the restored checkpoint holds no input dataset positions: the input starts from the "
                            "beginning of its datasets");
    tl_free(est->restored_input);
    tl_free(est->restored_path);
    est->restored_input = NULL;
    est->restored_path = NULL;
    est->restored_host_files = 0;
    return st;
}
