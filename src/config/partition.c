/* partition.c — input_partition_dims: parsing the nested structure and the
 * checks that need only num_cores_per_replica (spec §4.3). Matching against
 * the input's structure and cutting tiles is mesh/partition_plan.c. */
#include <stdio.h>
#include <string.h>

#include "config_int.h"

static void node_free(tl_pd_node *n)
{
    if (n == NULL)
        return;
    for (int i = 0; i < n->n && n->kids; i++)
        node_free(n->kids[i]);
    for (int i = 0; i < n->n && n->keys; i++)
        tl_free(n->keys[i]);
    tl_free(n->kids);
    tl_free(n->keys);
    tl_free(n->dims);
    tl_free(n);
}

void tl_partition_dims_destroy(struct tl_partition_dims *pd)
{
    if (pd == NULL)
        return;
    node_free(pd->features);
    node_free(pd->labels);
    tl_free(pd);
}

#define PD_MAX_DEPTH 16
#define PD_MAX_ITEMS 4096

static tl_status parse_node(const json_t *v, const char *path, int depth, tl_pd_node **out)
{
    *out = NULL;
    if (depth > PD_MAX_DEPTH)
        return tl_error(TL_EINVAL, "%s: nested deeper than %d levels", path, PD_MAX_DEPTH);
    tl_pd_node *n = tl_calloc(1, sizeof *n);
    if (n == NULL)
        return tl_error_oom();
    tl_status st = TL_OK;
    if (json_is_null(v)) {
        n->kind = TL_PD_NONE;
    } else if (json_is_array(v)) {
        size_t len = json_array_size(v);
        if (len > PD_MAX_ITEMS) {
            st = tl_error(TL_EINVAL, "%s: more than %d entries", path, PD_MAX_ITEMS);
            goto fail;
        }
        size_t nint = 0;
        for (size_t i = 0; i < len; i++)
            nint += json_is_integer(json_array_get(v, i));
        n->n = (int)len;
        if (nint == len) {
            if (len > 8) {
                st = tl_error(TL_EINVAL, "%s: %zu dims; tensors have at most 8 dimensions", path, len);
                goto fail;
            }
            n->kind = TL_PD_DIMS;
            if ((n->dims = tl_calloc(len ? len : 1, sizeof *n->dims)) == NULL)
                goto oom;
            for (size_t i = 0; i < len; i++)
                n->dims[i] = json_integer_value(json_array_get(v, i));
        } else {
            n->kind = TL_PD_LIST;
            if ((n->kids = tl_calloc(len, sizeof *n->kids)) == NULL)
                goto oom;
            for (size_t i = 0; i < len; i++) {
                const json_t *e = json_array_get(v, i);
                if (!json_is_null(e) && !json_is_array(e) && !json_is_object(e)) {
                    st = tl_error(TL_ETYPE, "%s[%zu] must be a list of ints, a nested list, a dict or None, got %s"
                                  " (a list of dims must hold only ints)", path, i, tl_py_type(e));
                    goto fail;
                }
                char sub[256];
                snprintf(sub, sizeof sub, "%s[%zu]", path, i);
                if ((st = parse_node(e, sub, depth + 1, &n->kids[i])) != TL_OK)
                    goto fail;
            }
        }
    } else if (json_is_object(v)) {
        size_t len = json_object_size(v);
        if (len > PD_MAX_ITEMS) {
            st = tl_error(TL_EINVAL, "%s: more than %d keys", path, PD_MAX_ITEMS);
            goto fail;
        }
        n->kind = TL_PD_DICT;
        n->n = (int)len;
        if ((n->kids = tl_calloc(len ? len : 1, sizeof *n->kids)) == NULL ||
            (n->keys = tl_calloc(len ? len : 1, sizeof *n->keys)) == NULL)
            goto oom;
        const char *key;
        const json_t *e;
        int i = 0;
        json_object_foreach((json_t *)v, key, e) {
            if ((n->keys[i] = tl_strdup(key)) == NULL)
                goto oom;
            char sub[256];
            snprintf(sub, sizeof sub, "%s['%s']", path, key);
            if ((st = parse_node(e, sub, depth + 1, &n->kids[i])) != TL_OK)
                goto fail;
            i++;
        }
    } else {
        st = tl_error(TL_ETYPE, "%s must be a list of ints, a nested list, a dict or None, got %s", path,
                      tl_py_type(v));
        goto fail;
    }
    *out = n;
    return TL_OK;
oom:
    st = tl_error_oom();
fail:
    node_free(n);
    return st;
}

tl_status tl_partition_dims_parse(const json_t *v, struct tl_partition_dims **out)
{
    *out = NULL;
    struct tl_partition_dims *pd = tl_calloc(1, sizeof *pd);
    if (pd == NULL)
        return tl_error_oom();
    tl_status st;
    const json_t *f = json_array_get(v, 0);
    if (json_is_null(f)) {
        st = tl_error(TL_EINVAL, "input_partition_dims[0] (the feature dims) must not be None.");
        goto fail;
    }
    if ((st = parse_node(f, "input_partition_dims[0]", 0, &pd->features)) != TL_OK)
        goto fail;
    if (json_array_size(v) == 2 &&
        (st = parse_node(json_array_get(v, 1), "input_partition_dims[1]", 0, &pd->labels)) != TL_OK)
        goto fail;
    *out = pd;
    return TL_OK;
fail:
    tl_partition_dims_destroy(pd);
    return st;
}

static void dims_str(const tl_pd_node *n, char *buf, size_t len)
{
    size_t off = 0;
    off += (size_t)snprintf(buf + off, len - off, "[");
    for (int i = 0; i < n->n && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s%lld", i ? ", " : "", (long long)n->dims[i]);
    if (off < len)
        snprintf(buf + off, len - off, "]");
}

static tl_status check_node(const tl_pd_node *n, int64_t ncpr)
{
    if (n == NULL || n->kind == TL_PD_NONE)
        return TL_OK;
    if (n->kind != TL_PD_DIMS) {
        for (int i = 0; i < n->n; i++) {
            tl_status st = check_node(n->kids[i], ncpr);
            if (st != TL_OK)
                return st;
        }
        return TL_OK;
    }
    char buf[200];
    int64_t prod = 1;
    for (int i = 0; i < n->n; i++) {
        if (n->dims[i] < 1) {
            dims_str(n, buf, sizeof buf);
            return tl_error(TL_EINVAL, "All input partition dims must be >= 1. (dims = %s)", buf);
        }
        if (prod > ncpr || n->dims[i] > ncpr)
            prod = ncpr + 1; /* too many already; stop before int64 overflows */
        else
            prod *= n->dims[i];
    }
    if (prod != 1 && prod != ncpr) {
        dims_str(n, buf, sizeof buf);
        return tl_error(TL_EINVAL,
                        "The product of each input partition dim should equal to num_cores_per_replica. "
                        "(dim = %s, num_cores_per_replica = %lld)", buf, (long long)ncpr);
    }
    return TL_OK;
}

tl_status tl_partition_dims_check(const struct tl_partition_dims *pd, int64_t ncpr)
{
    tl_status st = check_node(pd->features, ncpr);
    if (st == TL_OK)
        st = check_node(pd->labels, ncpr);
    return st;
}

static json_t *node_json(const tl_pd_node *n)
{
    if (n == NULL || n->kind == TL_PD_NONE)
        return json_null();
    if (n->kind == TL_PD_DIMS) {
        json_t *a = json_array();
        for (int i = 0; a && i < n->n; i++)
            json_array_append_new(a, json_integer(n->dims[i]));
        return a;
    }
    if (n->kind == TL_PD_LIST) {
        json_t *a = json_array();
        for (int i = 0; a && i < n->n; i++)
            json_array_append_new(a, node_json(n->kids[i]));
        return a;
    }
    json_t *o = json_object();
    for (int i = 0; o && i < n->n; i++)
        json_object_set_new(o, n->keys[i], node_json(n->kids[i]));
    return o;
}

json_t *tl_partition_dims_to_json(const struct tl_partition_dims *pd)
{
    json_t *a = json_array();
    if (a == NULL)
        return NULL;
    json_array_append_new(a, node_json(pd->features));
    if (pd->labels != NULL)
        json_array_append_new(a, node_json(pd->labels));
    return a;
}
