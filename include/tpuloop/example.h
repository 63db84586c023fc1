/*
 * tpuloop/example.h — tf.train.Example and tf.train.SequenceExample: reading
 * the records of TensorFlow input pipelines, and turning them into dense and
 * ragged values by a feature spec, as tf.io.parse_single_example and
 * tf.io.parse_single_sequence_example do.
 *
 * An Example is a map from feature name to a Feature, which holds one list of
 * values of one kind: bytes_list, float_list (float32) or int64_list, or no
 * kind at all (an empty Feature, which real writers produce). A
 * SequenceExample has such a map for the whole sequence (its context) and a
 * second map from name to a FeatureList, one Feature per step.
 *
 * tl_example_parse decodes one serialized record (a TFRecord payload) into a
 * read-only view: features sorted by key (strcmp order; on the wire the order
 * is arbitrary and changes from record to record), each with its kind and
 * values. A key that appears twice keeps its last value, as protobuf's maps
 * do. Both encodings of the numeric lists, packed (what TensorFlow writes)
 * and unpacked, are accepted. A key is a C string: its bytes are not checked
 * for UTF-8 (TensorFlow's fast parser does not either), and one holding a
 * NUL byte is cut there (feature names never hold one).
 *
 * tl_example_parse_features applies a feature spec:
 *   TL_SPEC_FIXED_LEN            (tf.io.FixedLenFeature)  dense values of a fixed
 *                                shape, or the default when the feature is absent
 *   TL_SPEC_VAR_LEN              (tf.io.VarLenFeature)    all the values, any count
 *   TL_SPEC_FIXED_LEN_SEQUENCE   (tf.io.FixedLenSequenceFeature) one fixed-shape
 *                                value per step of a feature list: (steps, shape...)
 *   TL_SPEC_VAR_LEN_SEQUENCE     (a VarLenFeature of sequence_features) a ragged
 *                                (steps, ?) list: the values plus one length per step
 * The first two read an Example's features or a SequenceExample's context;
 * the last two read feature lists (an Example has none).
 *
 * tl_example_builder (the last section) goes the other way: it collects
 * features and serializes an Example, byte for byte what Python's protobuf
 * writes with SerializeToString(deterministic=True).
 *
 *     tl_example *ex;
 *     if (tl_example_parse(rec, len, index, &ex) != TL_OK) ...   // TL_EPARSE
 *     const tl_feature *f = tl_example_find(ex, "label");
 *     if (f != NULL && f->kind == TL_FEATURE_INT64 && f->count == 1) use(f->int64s[0]);
 *
 *     const float zero = 0.0f;
 *     tl_feature_spec specs[2] = {
 *         {.key = "image", .type = TL_SPEC_FIXED_LEN, .dtype = TL_FEATURE_FLOAT,
 *          .rank = 2, .shape = {28, 28}, .default_value = &zero, .default_count = 1},
 *         {.key = "tags", .type = TL_SPEC_VAR_LEN, .dtype = TL_FEATURE_BYTES},
 *     };
 *     tl_parsed_feature out[2];
 *     if (tl_example_parse_features(ex, specs, 2, out) != TL_OK)
 *         fprintf(stderr, "%s\n", tl_last_error());
 *         // record 7: feature "image" (data type: float32) is required but could not be found
 *     ... out[0].floats (28, 28), out[1].bytes (out[1].count) ...
 *     tl_parsed_features_free(out, 2);
 *     tl_example_destroy(ex);
 *
 * Every error names the record's index (as the caller passed it) and the
 * key, and says what was expected and what was found; the wording follows
 * TensorFlow's parsing ops where it has one. An example is read-only after
 * parsing, so any number of threads may read one at once.
 */
#ifndef TPULOOP_EXAMPLE_H
#define TPULOOP_EXAMPLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpuloop/base.h"

/* A Feature's kind (its oneof), also the dtype of a spec. */
typedef enum tl_feature_kind {
    TL_FEATURE_NONE = 0,  /* an empty Feature: no kind set, no values */
    TL_FEATURE_BYTES = 1, /* bytes_list (tf.string) */
    TL_FEATURE_FLOAT = 2, /* float_list (tf.float32) */
    TL_FEATURE_INT64 = 3  /* int64_list (tf.int64) */
} tl_feature_kind;

/* One bytes value: not NUL-terminated, may hold any byte. */
typedef struct tl_bytes {
    const uint8_t *data; /* (len); non-NULL even when len is 0 */
    size_t len;
} tl_bytes;

/* One Feature of a parsed example. Exactly the array of its kind is set
 * (all NULL for TL_FEATURE_NONE). */
typedef struct tl_feature {
    const char *key;        /* the map key; NULL for a step of a feature list */
    tl_feature_kind kind;
    size_t count;           /* number of values */
    const float *floats;    /* (count) when kind is TL_FEATURE_FLOAT */
    const int64_t *int64s;  /* (count) when kind is TL_FEATURE_INT64 */
    const tl_bytes *bytes;  /* (count) when kind is TL_FEATURE_BYTES */
} tl_feature;

/* One FeatureList of a parsed SequenceExample. */
typedef struct tl_feature_list {
    const char *key;
    size_t count;            /* number of steps */
    const tl_feature *steps; /* (count) */
} tl_feature_list;

typedef struct tl_example tl_example;

/* "bytes_list", "float_list", "int64_list" or "none" (TensorFlow's oneof
 * names); "?" for a value outside the enum. */
TL_API const char *tl_feature_kind_name(tl_feature_kind kind);

/*
 * Decodes data[0..len) as a serialized tensorflow.Example into *out, a view
 * that owns its memory (data may be freed afterwards). index is the record's
 * number, which every error about this example names.
 * Errors: TL_EPARSE when the bytes are not an Example (truncated, a wrong
 * wire type, a bad varint, ...), naming the index and the length;
 * TL_EINVAL when data is NULL and len is not 0; TL_ENOMEM. *out is NULL on
 * error.
 */
TL_API tl_status tl_example_parse(const void *data, size_t len, uint64_t index, tl_example **out);

/* As tl_example_parse, for a serialized tensorflow.SequenceExample: the
 * features are its context, and its feature lists are read too. */
TL_API tl_status tl_sequence_example_parse(const void *data, size_t len, uint64_t index,
                                           tl_example **out);

/* Frees ex and everything it owns; every pointer read from it dies. NULL is a
 * no-op. */
TL_API void tl_example_destroy(tl_example *ex);

/* The index given to the parse call. */
TL_API uint64_t tl_example_index(const tl_example *ex);

/* Whether ex came from tl_sequence_example_parse. */
TL_API bool tl_example_is_sequence(const tl_example *ex);

/* The features (an Example's, or a SequenceExample's context), sorted by key
 * with duplicates removed; *n is their number. Valid while ex lives. */
TL_API const tl_feature *tl_example_features(const tl_example *ex, size_t *n);

/* The feature called key (not NULL), or NULL when there is none. */
TL_API const tl_feature *tl_example_find(const tl_example *ex, const char *key);

/* A SequenceExample's feature lists, sorted by key with duplicates removed
 * (none for an Example); *n is their number. Valid while ex lives. */
TL_API const tl_feature_list *tl_example_feature_lists(const tl_example *ex, size_t *n);

/* The feature list called key (not NULL), or NULL when there is none. */
TL_API const tl_feature_list *tl_example_find_list(const tl_example *ex, const char *key);

/* ======================================================================== */
/* Feature specs                                                            */
/* ======================================================================== */

#define TL_FEATURE_MAX_RANK 8

typedef enum tl_feature_spec_type {
    TL_SPEC_FIXED_LEN = 0,
    TL_SPEC_VAR_LEN = 1,
    TL_SPEC_FIXED_LEN_SEQUENCE = 2,
    TL_SPEC_VAR_LEN_SEQUENCE = 3
} tl_feature_spec_type;

/* How to read one feature. */
typedef struct tl_feature_spec {
    const char *key;
    tl_feature_spec_type type;
    tl_feature_kind dtype; /* TL_FEATURE_FLOAT, _INT64 or _BYTES */
    /* FIXED_LEN: the value's shape; FIXED_LEN_SEQUENCE: one step's. Every
     * dimension >= 0; rank 0 is a scalar (one value). */
    int rank;
    int64_t shape[TL_FEATURE_MAX_RANK]; /* (rank) */
    /* FIXED_LEN only: NULL makes the feature required; otherwise a float,
     * int64_t or tl_bytes array (by dtype) of default_count values, either 1
     * (every element) or the product of the shape. Borrowed: bytes defaults
     * are returned by pointer, so they must outlive the result. */
    const void *default_value;
    size_t default_count;
    /* FIXED_LEN_SEQUENCE only: a missing feature list is zero steps instead
     * of an error (allow_missing=True in TensorFlow). */
    bool allow_missing;
} tl_feature_spec;

/* One spec's result. Exactly the array of dtype is set (NULL when count is
 * 0); tl_parsed_features_free frees it. Bytes values point into the example
 * (or the spec's default), so they live as long as it does. */
typedef struct tl_parsed_feature {
    tl_feature_kind dtype;
    size_t count;    /* number of values */
    float *floats;   /* (count) */
    int64_t *int64s; /* (count) */
    tl_bytes *bytes; /* (count) */
    /* The dense shape: FIXED_LEN the spec's; FIXED_LEN_SEQUENCE (steps,
     * shape...); VAR_LEN (count); VAR_LEN_SEQUENCE (steps, longest step). */
    int rank;
    int64_t shape[TL_FEATURE_MAX_RANK + 1]; /* (rank) */
    /* VAR_LEN: one row, count long; VAR_LEN_SEQUENCE: one row per step, the
     * values of step i being the row_lengths[i] after those of steps < i.
     * 0 and NULL for the fixed-length types. */
    size_t num_rows;
    int64_t *row_lengths; /* (num_rows) */
} tl_parsed_feature;

/*
 * Reads each of the n specs from ex into out[i] (out holds n entries).
 * A FIXED_LEN feature that is absent, or present with no kind set, takes its
 * default; a VAR_LEN one is then empty. A feature list step with no kind set
 * has no values.
 * Errors, all naming the record index and the key:
 *   TL_EINVAL for a bad spec ("specs[2] (key \"x\"): ..."): NULL key, unknown
 *     type or dtype, rank outside 0..TL_FEATURE_MAX_RANK, a negative
 *     dimension, a default on a type that has none or of the wrong count,
 *     a shape whose size overflows;
 *   TL_EINVAL when the example does not fit the spec: a required feature or
 *     feature list that is missing ("is required but could not be found"),
 *     a feature of another kind ("data types don't match"), a fixed-length
 *     feature or step with the wrong number of values ("number of float
 *     values != expected");
 *   TL_ENOMEM.
 * On error every out[i] is zeroed, nothing needs freeing.
 */
TL_API tl_status tl_example_parse_features(const tl_example *ex, const tl_feature_spec *specs, size_t n,
                                           tl_parsed_feature *out);

/* Frees the arrays of out[0..n) and zeroes the entries. NULL is a no-op. */
TL_API void tl_parsed_features_free(tl_parsed_feature *out, size_t n);

/* ======================================================================== */
/* Writing an Example                                                       */
/* ======================================================================== */

/*
 * A tl_example_builder collects the features of one tf.train.Example and
 * serializes it, the record TFRecordWriter files hold:
 *
 *     tl_example_builder *b;
 *     if (tl_example_builder_create(&b) != TL_OK) ...
 *     for (each example) {
 *         tl_example_builder_reset(b);
 *         tl_example_builder_add_floats(b, "image", pixels, 784);
 *         tl_example_builder_add_int64s(b, "label", &label, 1);
 *         const uint8_t *rec;
 *         size_t len;
 *         if (tl_example_builder_serialize(b, &rec, &len) != TL_OK) ...
 *         write_record(rec, len);        // valid until the next call on b
 *     }
 *     tl_example_builder_destroy(b);
 *
 * The values are copied when added, so the caller's arrays may be reused at
 * once. The bytes are those of Python's
 * example.SerializeToString(deterministic=True): the map entries in key
 * order (strcmp's, which is protobuf's byte order), each entry with its key
 * and value, the numeric lists packed, and the features field present even
 * with no feature (the bytes 0a 00, as Example(features=Features())
 * serializes). Any Example parser reads them; tl_example_parse gives back
 * every value bit for bit, NaN payloads included.
 *
 * A builder reuses its memory from one example to the next, so a loop over a
 * data set allocates only while its largest example grows. It is used by one
 * thread at a time.
 */
typedef struct tl_example_builder tl_example_builder;

/* A new, empty builder, freed with tl_example_builder_destroy.
 * Errors: TL_EINVAL when out is NULL; TL_ENOMEM. */
TL_API tl_status tl_example_builder_create(tl_example_builder **out);

/* Frees b and the bytes it serialized. NULL is a no-op. */
TL_API void tl_example_builder_destroy(tl_example_builder *b);

/* Removes every feature (the memory is kept for the next example). */
TL_API void tl_example_builder_reset(tl_example_builder *b);

/*
 * Adds the feature key holding count values: float_list, int64_list or
 * bytes_list. values may be NULL when count is 0 (an empty list of that
 * kind, which is not the same as an empty Feature). key and the values are
 * copied.
 * Errors: TL_EINVAL for a NULL b or key, an empty key (protobuf's encoders
 * disagree on its bytes, and no feature spec names it), NULL values with
 * count > 0 (or a NULL data with len > 0 in a tl_bytes), or a size that
 * overflows; TL_ENOMEM. A key added twice is reported by
 * tl_example_builder_serialize.
 */
TL_API tl_status tl_example_builder_add_floats(tl_example_builder *b, const char *key, const float *values,
                                               size_t count);
TL_API tl_status tl_example_builder_add_int64s(tl_example_builder *b, const char *key, const int64_t *values,
                                               size_t count);
TL_API tl_status tl_example_builder_add_bytes(tl_example_builder *b, const char *key, const tl_bytes *values,
                                              size_t count);

/* Adds the feature key as a Feature with no kind set (what parsing reports
 * as TL_FEATURE_NONE). Errors: as tl_example_builder_add_floats. */
TL_API tl_status tl_example_builder_add_empty(tl_example_builder *b, const char *key);

/* The number of features added since the last reset. */
TL_API size_t tl_example_builder_count(const tl_example_builder *b);

/*
 * Serializes the features added since the last reset into *data (len
 * bytes), owned by b and valid until the next call on it. The features stay,
 * so serializing twice gives the same bytes.
 * Errors: TL_EINVAL when b, data or len is NULL, when a key was added twice
 * (naming it), or when the example would exceed 2 GiB - 1 bytes, protobuf's
 * limit on a message; TL_ENOMEM.
 */
TL_API tl_status tl_example_builder_serialize(tl_example_builder *b, const uint8_t **data, size_t *len);

#endif /* TPULOOP_EXAMPLE_H */
