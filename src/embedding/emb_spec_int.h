/* emb_spec_int.h — what the configuration readers share: the spec's layout,
 * its allocation, its names and the checks both readers end with (spec.c,
 * for spec_proto.c and spec_json.c), and the JSON value readers
 * (spec_json.c) that the optimizer object (spec_json_optim.c) uses too. */
#ifndef TL_EMB_SPEC_INT_H
#define TL_EMB_SPEC_INT_H

#include <jansson.h>

#include "../base/base_int.h"
#include "tpuloop/emb_spec.h"

struct tl_emb_spec {
    tl_emb_config cfg;               /* tables and features point into the arrays below */
    tl_emb_table_config *tables;     /* (num_tables) */
    tl_emb_optimizer *opts;          /* (num_tables) each table's own optimizer, when tables[i].optimizer is set */
    tl_emb_feature_config *features; /* (num_features) */
    char **names;                    /* (num_tables + num_features) the tables' then the features' names */
};

/* A spec of num_tables tables and num_features features, all zero (MEAN,
 * truncated normal with stddev 1/sqrt(dim), no optimizer, no name), its
 * config tl_emb_config_default's pointing at them. TL_ENOMEM. */
tl_status emb_spec_new(int num_tables, int num_features, tl_emb_spec **out);

/* Names table i (feature: is_feature) text[0..len), or "<kind>_<i>" when
 * len is 0. TL_ENOMEM. */
tl_status emb_spec_set_name(tl_emb_spec *s, bool is_feature, int i, const char *text, size_t len);

/* The index of the table named name, or -1. */
int emb_spec_find_table(const tl_emb_spec *s, const char *name);

/* The checks both readers end with: unique table names ("Multiple tables
 * with name X found."), then each table's optimizer (its own or the
 * config's) through tl_emb_optimizer_validate, its error prefixed with
 * `table "<name>": `. */
tl_status emb_spec_finish(const tl_emb_spec *s);

/* ---- JSON values (spec_json.c) ----------------------------------------------
 *
 * Each reads the JSON value v of the key whose path is where
 * ("embedding.tables[0].dim") and fails with TL_ETYPE naming the path, the
 * wanted type and Python's name of the type it got, or TL_EINVAL naming the
 * path, the rule and the value. */

/* The size of a path buffer. */
#define EMB_WHERE_MAX 256

/* w (EMB_WHERE_MAX bytes) = where + suffix, or where + "." + key, cut to fit. */
const char *emb_json_path(char *w, const char *where, const char *suffix);
const char *emb_json_key(char *w, const char *where, const char *key);

/* Python's name of v's type ("dict", "str", "NoneType", ...). */
const char *emb_json_type(const json_t *v);
/* A short repr of v for messages ('abc', 3, True, None) in buf. */
const char *emb_json_repr(const json_t *v, char *buf, size_t n);

tl_status emb_json_wrong_type(const json_t *v, const char *where, const char *want);
/* TL_EUNKNOWN for a key of o not in allowed (NULL-terminated), listing them. */
tl_status emb_json_check_keys(const json_t *o, const char *where, const char *const *allowed);
tl_status emb_json_object(const json_t *v, const char *where, const char *what);
tl_status emb_json_int(const json_t *v, const char *where, int64_t lo, int64_t hi, int64_t *out);
tl_status emb_json_int32(const json_t *v, const char *where, int lo, int *out);
tl_status emb_json_number(const json_t *v, const char *where, double *out);
/* A number that fits a float32. */
tl_status emb_json_float(const json_t *v, const char *where, float *out);
tl_status emb_json_bool(const json_t *v, const char *where, bool *out);
/* One of names[0..n) (NULL entries skipped) in any case; *out its index. */
tl_status emb_json_enum(const json_t *v, const char *where, const char *const *names, int n, int *out);
/* A bound: a number, or null for none. */
tl_status emb_json_bound(const json_t *v, const char *where, bool *has, float *x);
/* {"lower": x|null, "upper": x|null} */
tl_status emb_json_limits(const json_t *v, const char *where, tl_emb_limits *l);

/* ---- the optimizer object (spec_json_optim.c) ---------------------------------- */

/* An optimizer object into *o: "type" and the keys its algorithm takes. */
tl_status emb_json_optimizer(const json_t *v, const char *where, tl_emb_optimizer *o);

#endif /* TL_EMB_SPEC_INT_H */
