/* hosts.c — the job's start over several hosts: before anything trains,
 * every host checks that it builds the same job as host 0 (the same
 * tpuloop, resolved configuration, model, embedding tables and data), field
 * by field, so that a host started with another file or flag fails at once,
 * on every host, naming the field — instead of training other bits or
 * waiting in a collective that the others never join. */
#include <jansson.h>
#include <sha2.h>
#include <stdio.h>
#include <string.h>

#include "job_int.h"

/* One field: its name and the SHA-256 of its value's text. */
typedef struct field {
    char name[160];
    char value[96]; /* the start of the text, for the message */
    uint8_t sha[SHA256_DIGEST_LENGTH];
} field;

typedef struct fields {
    field *v;
    int n, cap;
    bool oom;
} fields;

static void add(fields *fs, const char *name, const void *text, size_t len)
{
    if (fs->n == fs->cap) {
        int cap = fs->cap ? 2 * fs->cap : 64;
        field *v = realloc(fs->v, (size_t)cap * sizeof *v);
        if (v == NULL) {
            fs->oom = true;
            return;
        }
        fs->v = v;
        fs->cap = cap;
    }
    field *f = &fs->v[fs->n++];
    snprintf(f->name, sizeof f->name, "%s", name);
    size_t shown = len < sizeof f->value - 1 ? len : sizeof f->value - 1;
    memcpy(f->value, text, shown);
    f->value[shown] = '\0';
    SHA2_CTX ctx;
    SHA256Init(&ctx);
    SHA256Update(&ctx, text, len);
    SHA256Final(f->sha, &ctx);
}

/* The configuration's values, one field per key (sections by "a.b"). */
static void add_json(fields *fs, const char *prefix, json_t *v, int depth)
{
    if (json_is_object(v) && depth < 3) {
        const char *key;
        json_t *x;
        json_object_foreach(v, key, x) {
            char name[160];
            snprintf(name, sizeof name, "%s%s%s", prefix, prefix[0] ? "." : "", key);
            add_json(fs, name, x, depth + 1);
        }
        return;
    }
    char *text = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    if (text == NULL) {
        fs->oom = true;
        return;
    }
    add(fs, prefix, text, strlen(text));
    free(text);
}

/* In-memory data: its size and a sample of its values (the first and last
 * rows), cheap to hash and enough to tell two datasets apart. */
static void add_data(fields *fs, const char *name, const tl_labeled_data *d)
{
    if (d->num_examples == 0)
        return;
    SHA2_CTX ctx;
    SHA256Init(&ctx);
    int64_t n = d->num_examples, rows = n < 64 ? n : 64;
    for (int64_t k = 0; k < 2 * rows; k++) {
        int64_t i = k < rows ? k : n - 2 * rows + k;
        if (i < 0)
            continue;
        SHA256Update(&ctx, (const uint8_t *)(d->features + i * d->num_features),
                     (size_t)d->num_features * sizeof *d->features);
        SHA256Update(&ctx, (const uint8_t *)(d->labels + i), sizeof *d->labels);
        if (d->ids != NULL)
            SHA256Update(&ctx, (const uint8_t *)(d->ids + i * d->num_ids), (size_t)d->num_ids * sizeof *d->ids);
    }
    uint8_t sha[SHA256_DIGEST_LENGTH];
    SHA256Final(sha, &ctx);
    char text[200];
    int len = snprintf(text, sizeof text, "%lld examples of %lld values, sample %02x%02x%02x%02x%02x%02x",
                       (long long)n, (long long)d->num_features, sha[0], sha[1], sha[2], sha[3], sha[4], sha[5]);
    add(fs, name, text, (size_t)len);
}

static void add_files(fields *fs, const char *name, const tl_job *job, int split)
{
    const char *const *names;
    int n = tl_job_files_list(job, split, &names);
    if (n == 0)
        return;
    SHA2_CTX ctx;
    SHA256Init(&ctx);
    for (int i = 0; i < n; i++)
        SHA256Update(&ctx, (const uint8_t *)names[i], strlen(names[i]) + 1);
    uint8_t sha[SHA256_DIGEST_LENGTH];
    SHA256Final(sha, &ctx);
    char text[400];
    int len = snprintf(text, sizeof text, "%d file%s, %s%s (list %02x%02x%02x%02x)", n, n == 1 ? "" : "s", names[0],
                       n > 1 ? ", ..." : "", sha[0], sha[1], sha[2], sha[3]);
    len = len < (int)sizeof text ? len : (int)sizeof text - 1;
    /* The hash is of the whole list; the text shows its start. */
    add(fs, name, text, (size_t)len);
    memcpy(fs->v[fs->n - 1].sha, sha, sizeof sha);
}

static tl_status collect(const tl_job *job, fields *fs)
{
    add(fs, "tpuloop version", TL_VERSION_STRING, strlen(TL_VERSION_STRING));
    char *text;
    tl_status st = tl_config_to_json(job->cfg, &text);
    if (st != TL_OK)
        return st;
    json_t *root = json_loads(text, 0, NULL);
    tl_free_string(text);
    if (root == NULL)
        return tl_error(TL_ENOMEM, "the hosts' check: cannot read the resolved configuration back");
    add_json(fs, "", root, 0);
    json_decref(root);
    add_data(fs, "training data", &job->train);
    add_data(fs, "evaluation data", &job->test);
    add_files(fs, "training files", job, 0);
    add_files(fs, "evaluation files", job, 1);
    return fs->oom ? tl_error(TL_ENOMEM, "the hosts' check: out of memory") : TL_OK;
}

/* What each host tells the others first: whether it got this far, its
 * field count and, when it did not, why. */
enum { HDR_WORDS = 64 };
typedef union header {
    int64_t w[HDR_WORDS];
    struct {
        int64_t status;
        int64_t nfields;
        char msg[(HDR_WORDS - 2) * sizeof(int64_t)];
    } h;
} header;

tl_status tl_job_hosts_agree(tl_job *job, tl_status st)
{
    tl_comm *hosts = job->opt.hosts;
    if (hosts == NULL || tl_comm_processes(hosts) == 1)
        return st;
    int H = tl_comm_processes(hosts), me = tl_comm_process(hosts), rank = tl_comm_first_rank(hosts);
    fields fs = {0};
    if (st == TL_OK)
        st = collect(job, &fs);
    header mine;
    memset(&mine, 0, sizeof mine);
    mine.h.status = st;
    mine.h.nfields = fs.n;
    if (st != TL_OK)
        snprintf(mine.h.msg, sizeof mine.h.msg, "%s", tl_last_error());
    header *all = calloc((size_t)H, sizeof *all);
    int64_t *shas = NULL;
    tl_status ex = all != NULL ? tl_comm_all_gather(hosts, rank, mine.w, all, HDR_WORDS, TL_COMM_I64)
                               : tl_error(TL_ENOMEM, "the hosts' check: out of memory");
    /* The first host that failed fails every host with its message. */
    for (int h = 0; h < H && ex == TL_OK; h++)
        if (all[h].h.status != TL_OK) {
            all[h].h.msg[sizeof all[h].h.msg - 1] = '\0';
            ex = h == me ? tl_error(st, "%s", all[h].h.msg)
                         : tl_error((tl_status)all[h].h.status, "host %d: %s", h, all[h].h.msg);
        }
    for (int h = 1; h < H && ex == TL_OK; h++)
        if (all[h].h.nfields != all[0].h.nfields)
            ex = tl_error(TL_EINVAL, "hosts run different jobs: host %d's has %lld fields, host 0's %lld (another "
                                     "tpuloop?)", h, (long long)all[h].h.nfields, (long long)all[0].h.nfields);
    /* Then every field's digest, compared with host 0's in field order. */
    enum { SW = SHA256_DIGEST_LENGTH / sizeof(int64_t) };
    int64_t K = fs.n;
    if (ex == TL_OK) {
        int64_t *v = calloc((size_t)(K * SW) + 1, sizeof *v);
        shas = calloc((size_t)(H * K * SW) + 1, sizeof *shas);
        if (v == NULL || shas == NULL) {
            ex = tl_error(TL_ENOMEM, "the hosts' check: out of memory");
        } else {
            for (int64_t k = 0; k < K; k++)
                memcpy(v + k * SW, fs.v[k].sha, SHA256_DIGEST_LENGTH);
            ex = tl_comm_all_gather(hosts, rank, v, shas, K * SW, TL_COMM_I64);
        }
        free(v);
    }
    for (int h = 1; h < H && ex == TL_OK; h++)
        for (int64_t k = 0; k < K && ex == TL_OK; k++)
            if (memcmp(shas + (h * K + k) * SW, shas + k * SW, SHA256_DIGEST_LENGTH) != 0)
                ex = tl_error(TL_EINVAL, "hosts run different jobs: host %d differs from host 0 in \"%s\" (host %d "
                                         "has %s): start every host with the same configuration, flags and data",
                              h, fs.v[k].name, me, fs.v[k].value);
    free(shas);
    free(all);
    free(fs.v);
    return ex;
}
