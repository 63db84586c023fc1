/* transformer.c — the built-in Transformer encoder classifier (public API
 * only): token and position embeddings, post-LN encoder layers of
 * multi-head self-attention and a gelu feed-forward network, a mean over the
 * sequence and Dense logits. The shapes and names follow tpuloop/models.h
 * and bench/peers/transformer_torch.py. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <jansson.h>

#include "tpuloop/models.h"
#include "models_int.h"

#define MAX_VOCAB (1 << 24) /* token ids travel as float32: exact below 2^24 */
#define MAX_LAYERS 64
#define LN_EPSILON 1e-3 /* Keras' LayerNormalization */
#define EMB_INIT ((tl_initializer){TL_INIT_UNIFORM, -0.05, 0.05}) /* Keras' Embedding */

typedef struct sizes {
    int64_t d, heads, layers, ff, vocab, classes;
} sizes;

/* params' int `key` into *out when present (else *out keeps its default);
 * an error naming the param, the value and the range otherwise. */
static tl_status param(tl_graph *g, const json_t *params, const char *key, int64_t lo, int64_t hi, int64_t *out)
{
    const json_t *v = json_object_get(params, key);
    if (v == NULL)
        return TL_OK;
    if (json_is_integer(v) && json_integer_value(v) >= lo && json_integer_value(v) <= hi) {
        *out = json_integer_value(v);
        return TL_OK;
    }
    char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    tl_status st = tl_model_bad(g, "transformer: params %s must be an int in [%lld, %lld], got %.60s", key,
                                (long long)lo, (long long)hi, text != NULL ? text : "?");
    free(text);
    return st;
}

static tl_status read_sizes(tl_graph *g, const char *params_json, const tl_transformer_data *data, sizes *z)
{
    int64_t data_vocab = data != NULL ? data->vocab_size : 0;
    if (data_vocab < 0 || data_vocab > MAX_VOCAB)
        return tl_model_bad(g, "transformer: the data's vocab_size must be in [0, %d] (0: unknown), got %lld",
                            MAX_VOCAB, (long long)data_vocab);
    *z = (sizes){.d = 32, .heads = 2, .layers = 2, .vocab = data_vocab > 0 ? data_vocab : 16};
    json_t *params = params_json != NULL ? json_loads(params_json, 0, NULL) : NULL;
    tl_status st = param(g, params, "d_model", 1, 65536, &z->d);
    if (st == TL_OK)
        st = param(g, params, "num_heads", 1, z->d, &z->heads);
    if (st == TL_OK)
        st = param(g, params, "num_layers", 0, MAX_LAYERS, &z->layers);
    z->ff = 4 * z->d;
    if (st == TL_OK)
        st = param(g, params, "d_ff", 1, 1 << 20, &z->ff);
    if (st == TL_OK)
        st = param(g, params, "vocab_size", 2, MAX_VOCAB, &z->vocab);
    z->classes = z->vocab;
    if (st == TL_OK)
        st = param(g, params, "num_classes", 2, MAX_VOCAB, &z->classes);
    json_decref(params);
    if (st != TL_OK)
        return st;
    if (z->d % z->heads != 0)
        return tl_model_bad(g, "transformer: params d_model %lld is not divisible by num_heads %lld (each head takes "
                               "d_model / num_heads)", (long long)z->d, (long long)z->heads);
    if (z->vocab < data_vocab)
        return tl_model_bad(g, "transformer: params vocab_size %lld is below the data's %lld "
                               "(its token ids reach %lld)",
                            (long long)z->vocab, (long long)data_vocab, (long long)data_vocab - 1);
    return TL_OK;
}

/* (batch * S, d) -> (batch, heads, S, d / heads). */
static tl_t split_heads(tl_graph *g, tl_t x, int64_t batch, int64_t s, const sizes *z)
{
    int64_t shape[4] = {batch, s, z->heads, z->d / z->heads};
    static const int perm[4] = {0, 2, 1, 3};
    return tl_transpose(g, tl_reshape(g, x, shape, 4), perm, 4);
}

/* Multi-head self-attention of x (batch * S, d), merged and projected. */
static tl_t attention(tl_graph *g, tl_t x, int64_t batch, int64_t s, const sizes *z, int layer)
{
    char name[64];
    tl_t qkv[3];
    static const char *const parts[3] = {"query", "key", "value"};
    for (int p = 0; p < 3; p++) {
        snprintf(name, sizeof name, "layer_%d/attention/%s", layer, parts[p]);
        qkv[p] = split_heads(g, tl_dense(g, x, z->d, TL_ACT_NONE, name), batch, s, z);
    }
    tl_t scale = tl_constant(g, 1.0 / sqrt((double)(z->d / z->heads)), NULL, 0);
    tl_t scores = tl_batch_matmul(g, tl_mul(g, qkv[0], scale), qkv[1], false, true); /* (batch, h, S, S) */
    tl_t heads = tl_batch_matmul(g, tl_softmax(g, scores, 3), qkv[2], false, false); /* (batch, h, S, d/h) */
    static const int perm[4] = {0, 2, 1, 3};
    int64_t flat[2] = {batch * s, z->d};
    tl_t merged = tl_reshape(g, tl_transpose(g, heads, perm, 4), flat, 2);
    snprintf(name, sizeof name, "layer_%d/attention/output", layer);
    return tl_dense(g, merged, z->d, TL_ACT_NONE, name);
}

/* One post-LN encoder layer on x (batch * S, d). */
static tl_t encoder_layer(tl_graph *g, tl_t x, int64_t batch, int64_t s, const sizes *z, int layer)
{
    char name[64];
    snprintf(name, sizeof name, "layer_%d/attention_norm", layer);
    x = tl_layer_norm(g, tl_add(g, x, attention(g, x, batch, s, z, layer)), LN_EPSILON, name);
    snprintf(name, sizeof name, "layer_%d/ffn/dense", layer);
    tl_t f = tl_gelu(g, tl_dense(g, x, z->ff, TL_ACT_NONE, name), false);
    snprintf(name, sizeof name, "layer_%d/ffn/dense_1", layer);
    f = tl_dense(g, f, z->d, TL_ACT_NONE, name);
    snprintf(name, sizeof name, "layer_%d/ffn_norm", layer);
    return tl_layer_norm(g, tl_add(g, x, f), LN_EPSILON, name);
}

tl_status tl_model_transformer(tl_graph *g, const tl_model_args *a, tl_model_spec *spec, void *user)
{
    sizes z;
    tl_status st = read_sizes(g, a->params_json, user, &z);
    if (st != TL_OK)
        return st;
    int64_t dims[TL_MAX_RANK];
    int rank = tl_rank(g, a->features, dims);
    if (rank != 2) {
        if (rank < 0)
            return tl_model_bad(g, "transformer: features are not a tensor of this graph");
        return tl_model_bad(g, "transformer: features must be token ids (batch, sequence_length); got rank %d", rank);
    }
    int64_t batch = dims[0], s = dims[1];
    int64_t vshape[2] = {z.vocab, z.d}, pshape[2] = {s, z.d};
    tl_t table = tl_variable(g, "embedding/embeddings", vshape, 2, EMB_INIT);
    tl_t positions = tl_variable(g, "position_embedding/embeddings", pshape, 2, EMB_INIT);
    tl_t x = tl_add(g, tl_gather(g, table, tl_cast(g, a->features, TL_I32), 0), positions); /* (batch, S, d) */
    int64_t flat[2] = {batch * s, z.d};
    x = tl_reshape(g, x, flat, 2);
    for (int i = 0; i < (int)z.layers; i++)
        x = encoder_layer(g, x, batch, s, &z, i);
    int64_t seq[3] = {batch, s, z.d};
    static const int seq_axis[1] = {1};
    tl_t pooled = tl_reduce_mean(g, tl_reshape(g, x, seq, 3), seq_axis, 1, false); /* (batch, d) */
    tl_t logits = tl_dense(g, pooled, z.classes, TL_ACT_NONE, "logits");
    spec->logits = logits;
    spec->predictions = logits;
    if (a->mode != TL_MODE_PREDICT)
        spec->loss = tl_mean(g, tl_softmax_xent(g, logits, a->labels));
    return tl_graph_status(g);
}
