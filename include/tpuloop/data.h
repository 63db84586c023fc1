/*
 * tpuloop/data.h — the data a model trains on: IDX files (MNIST's format),
 * the MNIST / Fashion-MNIST loader, a synthetic classification set whose
 * labels come from a planted model, and synthetic token sequences labelled
 * by their majority token.
 *
 * Three layers, each usable alone:
 *
 *   tl_idx            one IDX file (plain or gzip), read into host byte order;
 *   tl_labeled_data   features float32 (N, D), labels int32 (N) and embedding
 *                     ids int64 (N, K) in memory —
 *                     what tl_mnist_load and tl_synthetic_load return, and what
 *                     the dataset pipeline (a later issue) slices, shuffles
 *                     and batches;
 *   tl_synthetic      a generator: example i is a pure function of (seed, i),
 *                     so any shard or slice can be made alone, in any order,
 *                     on any thread, with the same bits.
 *
 *     tl_labeled_data *train;
 *     if (tl_mnist_load(NULL, "train", &train) != TL_OK) {   // Fashion-MNIST
 *         fprintf(stderr, "error: %s\n", tl_last_error());
 *         return 1;
 *     }
 *     // train->num_examples == 60000, train->num_features == 784,
 *     // train->features[i * 784 + j] in [0, 1], train->labels[i] in 0..9
 *     tl_labeled_data_destroy(train);
 *
 *     tl_synthetic *gen;
 *     tl_synthetic_spec spec;
 *     tl_synthetic_spec_init(&spec);          // then set what differs
 *     spec.num_examples = 1 << 20;
 *     spec.num_features = 64;
 *     spec.num_classes = 10;
 *     spec.seed = 42;
 *     tl_synthetic_create(&spec, &gen);
 *     float x[256 * 64];
 *     int32_t y[256];
 *     tl_synthetic_generate(gen, 4096, 256, x, y);   // examples [4096, 4352)
 *     tl_synthetic_destroy(gen);
 *
 * Every function here may be called from any thread; an object is not
 * modified after it is created, so concurrent reads of one object are safe.
 */
#ifndef TPULOOP_DATA_H
#define TPULOOP_DATA_H

#include "tpuloop/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================== */
/* IDX files                                                                */
/* ======================================================================== */

/*
 * The IDX format (LeCun's, used by MNIST, Fashion-MNIST, KMNIST, EMNIST):
 *
 *   offset  size      field
 *   0       2         magic: two zero bytes
 *   2       1         element type: 0x08 u8, 0x09 i8, 0x0B i16, 0x0C i32,
 *                     0x0D f32, 0x0E f64
 *   3       1         ndim, the number of dimensions (tpuloop: 1..8)
 *   4       4 * ndim  the dimensions, each a big-endian u32, outermost first
 *   4+4*ndim ...      the elements in row-major order, each big-endian
 *
 * The file may be gzip-compressed as a whole (the usual ".gz" download); the
 * reader tells the two apart by the first two bytes (gzip's 1f 8b versus
 * IDX's 00 00), so a name's extension does not matter. Concatenated gzip
 * members are read as one stream, as gunzip does.
 *
 * Decisions where the format is silent:
 *   - a dimension of 0 is allowed: it is an empty array (numpy's shape
 *     (0, 28, 28)); ndim 0 is not (it is a sign of a corrupt header);
 *   - bytes after the last element are an error (TL_EPARSE), because IDX has
 *     no framing: extra bytes almost always mean the header's dimensions are
 *     wrong, and reading on would misalign every example. Set
 *     tl_idx_options.allow_trailing to accept them with a logged warning;
 *   - the element data may not exceed tl_idx_options.max_bytes (4 GiB by
 *     default), checked from the header before anything is allocated.
 *     Memory is grown as data actually arrives, so a header that lies about
 *     its size costs no more than the bytes really present.
 */
typedef enum {
    TL_IDX_U8 = 0x08,
    TL_IDX_I8 = 0x09,
    TL_IDX_I16 = 0x0B,
    TL_IDX_I32 = 0x0C,
    TL_IDX_F32 = 0x0D,
    TL_IDX_F64 = 0x0E
} tl_idx_dtype;

#define TL_IDX_MAX_NDIM 8
#define TL_IDX_DEFAULT_MAX_BYTES ((uint64_t)4 << 30)

typedef struct tl_idx_options {
    uint64_t max_bytes;  /* largest element data accepted, in bytes; 0 = the default, 4 GiB */
    bool allow_trailing; /* accept bytes after the data (logs a warning); default false */
} tl_idx_options;

/* An IDX array in host byte order. Opaque; read it with the accessors. */
typedef struct tl_idx tl_idx;

/* Fills in the defaults (max_bytes 4 GiB, no trailing bytes). */
TL_API void tl_idx_options_init(tl_idx_options *o);

/*
 * Reads the IDX file at path, plain or gzip. opts may be NULL for the
 * defaults. On success *out is a new array the caller frees with
 * tl_idx_destroy; on failure *out is NULL and the message begins with path.
 * Errors:
 *   TL_EIO     the file cannot be opened or read ("<path>: cannot open: No such
 *              file or directory");
 *   TL_EPARSE  the content is not a valid IDX file: an empty file; a bad magic;
 *              an unknown type byte; ndim 0 or above 8; a header cut short;
 *              fewer data bytes than the header declares (the message gives
 *              the bytes expected and the bytes read, after decompression);
 *              trailing bytes; corrupt or truncated gzip data;
 *   TL_EINVAL  the data would exceed max_bytes, or its size overflows 64 bits;
 *              path is NULL (the one message without a path);
 *   TL_ENOMEM  out of memory ("<path>: out of memory ...").
 */
TL_API tl_status tl_idx_read_file(const char *path, const tl_idx_options *opts, tl_idx **out);

/*
 * As tl_idx_read_file, from size bytes at data (plain or gzip). name labels
 * the messages (NULL: "<memory>"). data is only read during the call; it may
 * be NULL when size is 0 (an empty input, TL_EPARSE), else TL_EINVAL.
 */
TL_API tl_status tl_idx_read_memory(const void *data, size_t size, const char *name, const tl_idx_options *opts,
                                    tl_idx **out);

/* Frees an array; NULL is ignored. */
TL_API void tl_idx_destroy(tl_idx *a);

TL_API tl_idx_dtype tl_idx_type(const tl_idx *a);
TL_API int tl_idx_ndim(const tl_idx *a);
/* Dimension i (0 <= i < ndim), or -1 for an i out of range. */
TL_API int64_t tl_idx_dim(const tl_idx *a, int i);
/* The number of elements, the product of the dimensions. */
TL_API int64_t tl_idx_count(const tl_idx *a);
/* The elements, row-major, as the C type of the dtype (uint8_t, int8_t,
 * int16_t, int32_t, float, double) in host byte order, aligned for any of
 * them. Valid until tl_idx_destroy. Never NULL, even for an empty array. */
TL_API const void *tl_idx_data(const tl_idx *a);

/* Bytes per element of a dtype (1, 2, 4 or 8); 0 for a value not in the enum. */
TL_API size_t tl_idx_dtype_size(tl_idx_dtype t);
/* "u8", "i8", "i16", "i32", "f32", "f64"; "unknown" for other values. */
TL_API const char *tl_idx_dtype_name(tl_idx_dtype t);

/* ======================================================================== */
/* Labeled examples in memory                                               */
/* ======================================================================== */

#define TL_MAX_FEATURE_RANK 4

/*
 * N examples of D float features and one int32 class label each, and, for a
 * model with embedding tables, K int64 embedding ids each.
 *
 * The ids are typed, never floats among the features: an estimator with an
 * embedding engine (estimator.h) reads row i's ids as feature after feature
 * in the engine's feature order, W_f ids each (max_sequence_length for a
 * sequence feature, -1 marking an absent position; Π output_shape with an
 * output_shape; else 1), so K = Σ W_f. The features hold only the model's
 * dense inputs. Without ids (a model without embeddings) ids is NULL and
 * num_ids 0.
 */
typedef struct tl_labeled_data {
    int64_t num_examples;  /* N */
    int64_t num_features;  /* D, the product of feature_shape */
    int32_t num_classes;   /* C; every label is in [0, C) */
    int feature_rank;      /* 1..TL_MAX_FEATURE_RANK */
    int64_t feature_shape[TL_MAX_FEATURE_RANK]; /* (28, 28) for MNIST images, (D) for synthetic */
    float *features;       /* (N, D), row-major */
    int32_t *labels;       /* (N) */
    int64_t *ids;          /* (N, num_ids), row-major; NULL when num_ids is 0 */
    int64_t num_ids;       /* K >= 0, embedding ids per example */
} tl_labeled_data;

/* Frees the struct and its arrays; NULL is ignored. */
TL_API void tl_labeled_data_destroy(tl_labeled_data *d);

/* ======================================================================== */
/* MNIST and Fashion-MNIST                                                  */
/* ======================================================================== */

/* Where Debian's dataset-fashion-mnist package puts the files. */
#define TL_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"

/*
 * Loads one split of MNIST or Fashion-MNIST (they share file names and
 * format) from dir (NULL: TL_FASHION_MNIST_DIR). split is "train" (files
 * train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz]) or "test"
 * (t10k-...); the ".gz" name is tried first. Images must be u8 (N, H, W) and
 * labels u8 (N); the result has features x / 255 as float32 (N, H * W) — so
 * (N, 784) in [0, 1] for the real sets — feature_shape (H, W), and labels as
 * int32 in 0..9, num_classes 10. *out is freed with tl_labeled_data_destroy.
 * Errors:
 *   TL_EINVAL  split is not "train" or "test";
 *   TL_EIO     a file is missing (the message names it and says "install them
 *              with: apt-get install dataset-fashion-mnist, or run
 *              scripts/install-deps") or cannot be read;
 *   TL_EPARSE  a file is not valid IDX (see tl_idx_read_file), or is not what
 *              MNIST holds: the wrong type or rank, image and label counts
 *              that differ, no examples, a label outside 0..9 (the message
 *              gives the file, the index and the value);
 *   TL_ENOMEM  out of memory.
 */
TL_API tl_status tl_mnist_load(const char *dir, const char *split, tl_labeled_data **out);

/* ======================================================================== */
/* Synthetic classification data from a planted model                       */
/* ======================================================================== */

/*
 * Features x ~ N(0, I) of dimension D, and a planted model drawn from the
 * seed gives each label: label = argmax_c logits_c(x), where
 *
 *   hidden == 0:  logits = W1 x + b1                  W1 (C, D), b1 (C)
 *   hidden == H:  logits = W2 tanh(W1 x + b1) + b2     W1 (H, D), b1 (H),
 *                                                      W2 (C, H), b2 (C)
 *
 * The biases are 0 and the rows of the last layer are normalised to unit
 * length, so no class wins by a larger scale or offset: with D >= C the
 * classes come out roughly balanced (with D much smaller than C some classes
 * get small cones of feature space and are rare). The hidden layer's W1 is
 * drawn N(0, 1/D), so its pre-activations are about N(0, 1), where tanh is
 * neither linear nor saturated. Logits are summed in double, in index order,
 * from the float32 features as stored; a tie goes to the lower class.
 * With label_noise p > 0, each label is replaced with probability p by a class
 * drawn uniformly (which may be the true one).
 *
 * The planted model is a member of the family it names, so it is learnable:
 * without noise a linear softmax classifier (hidden == 0) or a one-hidden-layer
 * tanh MLP of width >= H can reach 100% training accuracy, and with enough
 * examples close to 100% on held-out ones; with noise p the best achievable
 * accuracy is about 1 - p (C - 1) / C. The model itself classifies its own
 * noiseless data at exactly 100% (tl_synthetic_model_of exposes it).
 *
 * Determinism: the model depends only on (seed, D, C, H); example i only on
 * (seed, i) and the model. The draws use tpuloop's counter-based RNG with the
 * example index as the step, so generating [a, b) directly gives the same
 * bits as generating [0, N) and slicing, on any thread.
 */
typedef struct tl_synthetic_spec {
    int64_t num_examples; /* N >= 0: the set is examples [0, N) */
    int64_t num_features; /* D, 1..1048576 */
    int32_t num_classes;  /* C, 2..65536 */
    int64_t hidden;       /* H: 0 for a linear planted model, else 1..4096 */
    double label_noise;   /* p in [0, 1) */
    uint64_t seed;
} tl_synthetic_spec;

typedef struct tl_synthetic tl_synthetic;

/* A view of the planted model; pointers live as long as the generator. */
typedef struct tl_synthetic_model {
    int64_t num_features; /* D */
    int32_t num_classes;  /* C */
    int64_t hidden;       /* H, 0 when linear */
    const float *w1;      /* (H, D), or (C, D) when linear */
    const float *b1;      /* (H), or (C) when linear */
    const float *w2;      /* (C, H); NULL when linear */
    const float *b2;      /* (C); NULL when linear */
} tl_synthetic_model;

/* Defaults: N 0, D 0 and C 0 (the caller must set them), H 0, p 0, seed 0.
 * The planted model's weights, (H or C) * D + C * H, are limited to 2^28
 * floats (1 GiB). */
TL_API void tl_synthetic_spec_init(tl_synthetic_spec *s);

/*
 * Draws the planted model of spec and returns a generator in *out (freed
 * with tl_synthetic_destroy). The spec is copied.
 * Errors: TL_EINVAL for a field out of range (the message names the field,
 * the value and the range); TL_ENOMEM.
 */
TL_API tl_status tl_synthetic_create(const tl_synthetic_spec *spec, tl_synthetic **out);

/* Frees a generator; NULL is ignored. */
TL_API void tl_synthetic_destroy(tl_synthetic *g);

/* The spec the generator was made from. */
TL_API const tl_synthetic_spec *tl_synthetic_get_spec(const tl_synthetic *g);

/* The planted model. */
TL_API tl_synthetic_model tl_synthetic_model_of(const tl_synthetic *g);

/*
 * Writes examples [first, first + count) into features (count, D) and labels
 * (count). labels may be NULL to skip them; features may not (the labels are
 * computed from them). Allocates nothing, so it may run in a device loop and
 * on many threads at once.
 * Errors: TL_EINVAL when first < 0, count < 0, first + count > N, or features
 * is NULL.
 */
TL_API tl_status tl_synthetic_generate(const tl_synthetic *g, int64_t first, int64_t count, float *features,
                                       int32_t *labels);

/*
 * All N examples of spec in memory, feature_shape (D), num_classes C.
 * Errors: as tl_synthetic_create; TL_EINVAL when N * D floats do not fit in
 * memory's address space; TL_ENOMEM.
 */
TL_API tl_status tl_synthetic_load(const tl_synthetic_spec *spec, tl_labeled_data **out);

/* ======================================================================== */
/* Synthetic token sequences labelled by their majority token               */
/* ======================================================================== */

/*
 * N sequences of S token ids from a vocabulary of V, each labelled by the
 * token it holds most often, which is unique by construction: a model that
 * counts tokens classifies every example, so the oracle accuracy is 100%,
 * and a small Transformer learns it quickly. The ids are stored as float32
 * features (N, S) (the infeed carries float32 features; every id below 2^24
 * is exact), the labels as int32 in [0, V), num_classes V.
 *
 * The generator of example i, all of whose words come in this order from the
 * counter-based RNG's stream (seed, "syn-seq", replica 0) at step i, where
 * below(n) = floor(u * n / 2^32) for the next 32-bit word u:
 *
 *   1. the planted token p = below(V), the label;
 *   2. its count k = lo + below(hi - lo + 1), where lo is the least
 *      k >= floor(S/4) + 1 with (V - 1)(k - 1) >= S - k (so the others can
 *      fill the rest), and hi = max(floor(S/2), lo): for S = V = 16, k is in
 *      [5, 8];
 *   3. positions 0 .. k-1 hold p; each of positions k .. S-1 in turn draws
 *      t = below(V - 1), takes token t + (t >= p) (uniform over the tokens
 *      other than p), and draws again while that token already fills k - 1
 *      of the positions before it (so every other token appears at most
 *      k - 1 times and p is the unique maximum);
 *   4. a Fisher-Yates shuffle: for j = S-1 down to 1, swap positions j and
 *      below(j + 1).
 *
 * Generating [a, b) directly gives the same bits as generating [0, N) and
 * slicing, on any thread. Step 3 compares each new token with the ones
 * before it, so an example costs O(S^2) at worst.
 */
typedef struct tl_synthetic_sequences_spec {
    int64_t num_examples;    /* N >= 0: the set is examples [0, N) */
    int64_t sequence_length; /* S, 1..4096 */
    int64_t vocab_size;      /* V, 2..16777216 */
    uint64_t seed;
} tl_synthetic_sequences_spec;

/* Defaults: N 0, S 16, V 16, seed 0. */
TL_API void tl_synthetic_sequences_spec_init(tl_synthetic_sequences_spec *s);

/*
 * Writes examples [first, first + count) into tokens (count, S) and labels
 * (count). Either may be NULL to skip it. Allocates nothing, so it may run
 * in a device loop and on many threads at once.
 * Errors: TL_EINVAL for a field of spec out of range (the message names the
 * field, the value and the range), or when first < 0, count < 0 or
 * first + count > N.
 */
TL_API tl_status tl_synthetic_sequences_generate(const tl_synthetic_sequences_spec *spec, int64_t first,
                                                 int64_t count, float *tokens, int32_t *labels);

/*
 * All N examples of spec in memory: features (N, S), feature_shape (S),
 * num_classes V. Freed with tl_labeled_data_destroy.
 * Errors: as tl_synthetic_sequences_generate; TL_EINVAL when N * S floats do
 * not fit in memory's address space; TL_ENOMEM.
 */
TL_API tl_status tl_synthetic_sequences_load(const tl_synthetic_sequences_spec *spec, tl_labeled_data **out);

#ifdef __cplusplus
}
#endif
#endif /* TPULOOP_DATA_H */
