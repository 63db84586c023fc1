/*
 * config_int.h — the option table and the configuration object's insides.
 *
 * A configuration keeps, for every option, the raw value last set (a jansson
 * value, whatever its type) and where it came from. Nothing is interpreted
 * when set; tl_config_resolve() reads the raw values in TensorFlow's order, so
 * type and range errors come out in the order TensorFlow raises them.
 */
#ifndef TL_CONFIG_INT_H
#define TL_CONFIG_INT_H

#include <jansson.h>

#include "../base/base_int.h"
#include "tpuloop/config.h"

typedef enum {
    TL_OPT_IPL,        /* iterations_per_loop: count or <N><s|m|h> */
    TL_OPT_INT,        /* int64 within [min, max]; may be None when nullable */
    TL_OPT_REAL,       /* a number; may be None when nullable */
    TL_OPT_BOOL,
    TL_OPT_STRING,     /* may be None when nullable */
    TL_OPT_INPUT_MODE, /* per_host_input_for_training / eval_training_input_configuration */
    TL_OPT_PDIMS,      /* input_partition_dims: a JSON structure */
    TL_OPT_OBJECT,     /* params: a JSON object */
    TL_OPT_LIST        /* a JSON list; a flag's text that is not JSON is one string */
} tl_opt_kind;

typedef enum {
#define TL_OPTION(name, ...) TL_OPT_ID_##name,
#include "options.def"
#undef TL_OPTION
    TL_NUM_OPTIONS
} tl_opt_id;

typedef struct tl_option {
    const char *name;        /* leaf name: the flag and the key in its section */
    const char *section;     /* NULL at top level, or "tpu_config" */
    tl_opt_kind kind;
    bool nullable;           /* None is a valid value */
    const char *default_json;/* the default as a JSON literal */
    int64_t min, max;        /* bounds of TL_OPT_INT */
    const char *env;         /* an environment variable that sets it, or NULL */
    const char *allowed;     /* what values are allowed, for help */
    const char *help;
} tl_option;

extern const tl_option tl_options[TL_NUM_OPTIONS];

/* The option with this leaf or dotted name, or -1. */
int tl_option_find(const char *name);

struct tl_partition_dims;

struct tl_config {
    json_t *raw[TL_NUM_OPTIONS];        /* never NULL: json null for None */
    tl_config_source source[TL_NUM_OPTIONS];
    char *origin[TL_NUM_OPTIONS];       /* "file run.json", "flag --x": tl_malloc'd or NULL */
    char *tf_config;                    /* TF_CONFIG's text, when the environment had it */

    bool resolved;
    tl_run_config rc;                   /* valid when resolved */
    char *s_tpu_job_name;               /* strings rc points into */
    char *s_model_dir;
    char *s_master;
    char *s_evaluation_master;
    char *s_params;
    char *s_warm_start_from;
    char *s_embedding_json, *s_embedding_config, *s_layout_map_json;
    char *s_warm_start_vars;
    struct tl_partition_dims *pdims;
    struct tl_input_store *input;       /* what rc.input's arrays point into */

    /* model_dir/config.json (model_dir.c), once tl_config_load_model_dir found one. */
    char *md_origin;                    /* "model_dir D/config.json"; NULL when none was loaded */
    json_t *md[TL_NUM_OPTIONS];         /* the file's values (NULL: the file has none) */
    json_t *md_canon[TL_NUM_OPTIONS];   /* the same as resolved and printed, to compare with */
};

/* Forgets the resolved values (every change calls it). */
void tl_config_clear_resolved(tl_config *cfg);

/* Checks every key of a configuration object (root; origin names it in
 * messages) and fills vals[id] with the value each option is given
 * (borrowed from root; NULL for the others). Nothing is set. Errors: those
 * of tl_config_load_json past the JSON syntax. */
tl_status tl_config_collect(const json_t *root, const char *origin, json_t *vals[TL_NUM_OPTIONS]);

/* Reads the file at path into sb, at most 16 MiB. Returns 0, ENOMEM, EFBIG
 * (too large) or the system's errno; *opened tells whether fopen worked. */
int tl_config_read_file(const char *path, tl_strbuf *sb, bool *opened);

/* The resolved value of option id as tl_config_to_json writes it (a new
 * reference; NULL when out of memory). cfg must be resolved. */
json_t *tl_config_value_json(const tl_config *cfg, int id);

/* ---- model_dir/config.json (model_dir.c) ---------------------------------- */

/* Frees what tl_config_load_model_dir kept; the options keep their values. */
void tl_config_model_dir_clear(tl_config *cfg);
/* At resolve, before any check: the values taken from model_dir/config.json
 * that clash with a choice of a higher source go back to their defaults (the
 * other half of a pair TensorFlow refuses together, evaluation_master that
 * followed the file's master, the input section of another dataset), so the
 * order of the calls that set values never matters. TL_ENOMEM. */
tl_status tl_config_model_dir_rules(tl_config *cfg);

/* Fails with a message plus " [from <source>]" of option id (the style of
 * every resolve error). */
tl_status tl_config_rerr(const tl_config *cfg, tl_opt_id id, tl_status st, const char *fmt, ...) TL_PRINTF(4, 5);

/* ---- the "input" section's files, specs and lists (input.c) ------------- */

struct tl_input_store;

/* Checks the input section's options past dataset, data_dir and epochs, in
 * the option table's order, then the combinations the dataset needs, and
 * fills cfg->rc.input, keeping its arrays in cfg->input. Errors: TL_EINVAL,
 * TL_ETYPE (naming the option, the key and field, the value and what is
 * allowed), TL_ENOMEM. */
tl_status tl_config_resolve_input(tl_config *cfg);
/* The synthetic datasets' options (synthetic_examples ... synthetic_vocab),
 * in the table's order: each is set in rc.input when the dataset reads it,
 * to its value or, for null, its default (the table's, or the dataset's for
 * the sizes), and unset otherwise; one the dataset does not read must be
 * null unless it is the table's default. Creates cfg->input. Errors:
 * TL_EINVAL, TL_ETYPE (naming the option, the value and what is allowed),
 * TL_ENOMEM. */
tl_status tl_config_resolve_synthetic(tl_config *cfg);
void tl_input_store_free(struct tl_input_store *s);
/* The resolved value of an input option as JSON (a new reference; NULL when
 * out of memory), or json_null() for an id that is not one of them. */
json_t *tl_input_value_json(const tl_config *cfg, tl_opt_id id);

/* Python's str() of a value, as TensorFlow's messages print it, into buf
 * (truncated with "..." when longer). False when out of memory ("<value>"
 * is written then, good enough for a message but not for parsing). */
bool tl_py_str(const json_t *v, char *buf, size_t n);
/* Python's type() of a value: "<class 'int'>", "<class 'float'>" ... */
const char *tl_py_type(const json_t *v);

/* " [from flag --num_shards]", or "" for a default. */
const char *tl_config_origin_suffix(const tl_config *cfg, tl_opt_id id, char *buf, size_t n);

/* input_partition_dims (partition.c), parsed into a tree that mirrors the
 * features / labels structure it describes. */
typedef enum { TL_PD_NONE, TL_PD_DIMS, TL_PD_LIST, TL_PD_DICT } tl_pd_kind;

typedef struct tl_pd_node {
    tl_pd_kind kind;
    int n;                     /* dims (TL_PD_DIMS) or children (LIST, DICT) */
    int64_t *dims;             /* (n) for TL_PD_DIMS */
    struct tl_pd_node **kids;  /* (n) for LIST and DICT */
    char **keys;               /* (n) for DICT */
} tl_pd_node;

struct tl_partition_dims {
    tl_pd_node *features;      /* never NULL and never TL_PD_NONE */
    tl_pd_node *labels;        /* NULL when omitted; TL_PD_NONE when None */
};

tl_status tl_partition_dims_parse(const json_t *v, struct tl_partition_dims **out);
void tl_partition_dims_destroy(struct tl_partition_dims *pd);
/* The per-tensor checks that need only num_cores_per_replica. */
tl_status tl_partition_dims_check(const struct tl_partition_dims *pd, int64_t ncpr);
/* The structure as JSON (new reference), for printing. */
json_t *tl_partition_dims_to_json(const struct tl_partition_dims *pd);

#endif /* TL_CONFIG_INT_H */
