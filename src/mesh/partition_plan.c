/* partition_plan.c — input_partition_dims against the features and labels
 * an input_fn returns (spec tpu_estimator.md §4.3), and the tiles each
 * logical core of a replica receives. */
#include <stdio.h>
#include <string.h>

#include "../config/config_int.h"
#include "tpuloop/topology.h"

static void keys_str(const char *const *keys, int n, char *buf, size_t len)
{
    size_t off = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < n && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s'%s'", i ? ", " : "", keys[i]);
    if (off < len)
        snprintf(buf + off, len - off, "]");
}

static void shape_str(const tl_tensor_desc *t, char *buf, size_t len)
{
    size_t off = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < t->rank && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (off < len)
        snprintf(buf + off, len - off, "]");
}

/* One tensor against a node that must be None or a dims list. */
static tl_status plan_tensor(const tl_pd_node *n, int64_t ncpr, const tl_tensor_desc *t, int which,
                             tl_tensor_partition *part)
{
    memset(part, 0, sizeof *part);
    part->rank = t->rank;
    if (n == NULL || n->kind == TL_PD_NONE) {
        part->kind = TL_PART_REPLICATE;
        return TL_OK;
    }
    if (n->kind != TL_PD_DIMS)
        return tl_error(TL_EINVAL, "TPUConfig.input_partition_dims[%d] mismatched the structure of %s: a tensor "
                                   "needs a list of ints or None", which, which ? "labels" : "features");
    int64_t prod = 1;
    for (int i = 0; i < n->n; i++) {
        if (n->dims[i] < 1)
            return tl_error(TL_EINVAL, "All input partition dims must be >= 1.");
        prod = prod > ncpr ? prod : prod * n->dims[i];
    }
    if (prod != 1 && prod != ncpr)
        return tl_error(TL_EINVAL, "The product of each input partition dim should equal to num_cores_per_replica. "
                                   "(num_cores_per_replica = %lld)", (long long)ncpr);
    if (n->n != t->rank) {
        char shape[200];
        shape_str(t, shape, sizeof shape);
        return tl_error(TL_EINVAL, "Input partition dims must have the same number of dimensions as the `Tensor` to "
                                   "be partitioned. (tensor shape = %s, input partition dims = %d entries).",
                        shape, n->n);
    }
    part->kind = prod == 1 ? TL_PART_CORE0 : TL_PART_TILED;
    memcpy(part->dims, n->dims, (size_t)n->n * sizeof *n->dims);
    return TL_OK;
}

static tl_status plan_struct(const tl_pd_node *n, int64_t ncpr, const tl_tensor_struct *s, int which,
                             tl_tensor_partition *parts)
{
    const char *what = which ? "labels" : "features";
    if (s == NULL || s->kind == TL_STRUCT_NONE || s->count == 0)
        return TL_OK;
    for (int i = 0; i < s->count; i++)
        if (s->tensors[i].rank < 0 || s->tensors[i].rank > TL_MAX_RANK)
            return tl_error(TL_EINVAL, "%s tensor %d has rank %d; ranks 0..%d are allowed", what, i,
                            s->tensors[i].rank, TL_MAX_RANK);
    if (n == NULL || n->kind == TL_PD_NONE) {
        for (int i = 0; i < s->count; i++)
            plan_tensor(NULL, ncpr, &s->tensors[i], which, &parts[i]);
        return TL_OK;
    }
    switch (s->kind) {
    case TL_STRUCT_TENSOR:
        return plan_tensor(n, ncpr, &s->tensors[0], which, &parts[0]);
    case TL_STRUCT_LIST:
        if (n->kind != TL_PD_LIST || n->n != s->count)
            return tl_error(TL_EINVAL, "TPUConfig.input_partition_dims[%d] mismatched the structure of %s: %d "
                                       "tensors need a list of %d entries",
                            which, what, s->count, s->count);
        for (int i = 0; i < s->count; i++) {
            tl_status st = plan_tensor(n->kids[i], ncpr, &s->tensors[i], which, &parts[i]);
            if (st != TL_OK)
                return st;
        }
        return TL_OK;
    case TL_STRUCT_DICT: {
        bool same = n->kind == TL_PD_DICT && n->n == s->count;
        for (int i = 0; same && i < s->count; i++) {
            bool found = false;
            for (int k = 0; k < n->n && !found; k++)
                found = s->tensors[i].name != NULL && strcmp(n->keys[k], s->tensors[i].name) == 0;
            same = found;
        }
        if (!same) {
            char want[400], got[400];
            const char *names[64];
            int m = s->count < 64 ? s->count : 64;
            for (int i = 0; i < m; i++)
                names[i] = s->tensors[i].name ? s->tensors[i].name : "";
            keys_str(names, m, want, sizeof want);
            if (n->kind == TL_PD_DICT)
                keys_str((const char *const *)n->keys, n->n, got, sizeof got);
            else
                snprintf(got, sizeof got, "a %s", n->kind == TL_PD_LIST ? "list" : "list of ints");
            return tl_error(TL_EINVAL, "TPUConfig.input_partition_dims[%d] mismatched %s keys. Expected %s, got %s",
                            which, which ? "label" : "feature", want, got);
        }
        for (int i = 0; i < s->count; i++) {
            const tl_pd_node *kid = NULL;
            for (int k = 0; k < n->n; k++)
                if (strcmp(n->keys[k], s->tensors[i].name) == 0)
                    kid = n->kids[k];
            tl_status st = plan_tensor(kid, ncpr, &s->tensors[i], which, &parts[i]);
            if (st != TL_OK)
                return st;
        }
        return TL_OK;
    }
    case TL_STRUCT_NONE:
        break;
    }
    return TL_OK;
}

tl_status tl_partition_plan(const tl_partition_dims *pd, int64_t ncpr, const tl_tensor_struct *features,
                            const tl_tensor_struct *labels, tl_tensor_partition *feature_parts,
                            tl_tensor_partition *label_parts)
{
    tl_status st = plan_struct(pd ? pd->features : NULL, ncpr, features, 0, feature_parts);
    if (st == TL_OK)
        st = plan_struct(pd ? pd->labels : NULL, ncpr, labels, 1, label_parts);
    return st;
}

tl_status tl_partition_tile(const int64_t *shape, const int64_t *dims, int rank, int core, int64_t *offset,
                            int64_t *size)
{
    if (rank < 0 || rank > TL_MAX_RANK)
        return tl_error(TL_EINVAL, "rank %d is outside [0, %d]", rank, TL_MAX_RANK);
    int64_t tiles = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 1)
            return tl_error(TL_EINVAL, "All input partition dims must be >= 1. (dim %d is %lld)", i,
                            (long long)dims[i]);
        if (shape[i] < 0)
            return tl_error(TL_EINVAL, "dimension %d has negative size %lld", i, (long long)shape[i]);
        if (tiles > INT32_MAX / dims[i])
            return tl_error(TL_EINVAL, "too many tiles");
        tiles *= dims[i];
    }
    if (core < 0 || core >= tiles)
        return tl_error(TL_EINVAL, "core %d is outside the %lld tiles of the partition", core, (long long)tiles);
    int64_t rest = core;
    for (int i = rank - 1; i >= 0; i--) {
        int64_t k = rest % dims[i];
        rest /= dims[i];
        int64_t chunk = (shape[i] + dims[i] - 1) / dims[i];
        int64_t off = k * chunk < shape[i] ? k * chunk : shape[i];
        int64_t end = off + chunk < shape[i] ? off + chunk : shape[i];
        offset[i] = off;
        size[i] = end - off;
    }
    return TL_OK;
}
