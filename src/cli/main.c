/* main.c — the `tpuloop` command: `help`, `version`, the dispatch to `config`
 * and `devices` (config.c),
 * and the dispatch to `train` (train.c), `evaluate` (evaluate.c), `predict`
 * (predict.c) and `ckpt` (ckpt.c).
 *
 * Exit status: 0 on success, 2 for a bad configuration or bad arguments, 1
 * for a runtime failure; errors are printed as "error: <message>" on stderr.
 * The command uses only the public API (include/tpuloop/). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "tpuloop/tpuloop.h"

extern char **environ;


int cli_fail(tl_status st)
{
    const char *tag = cli_hosts_tag(), *msg = tl_last_error()[0] ? tl_last_error() : tl_strerror(st);
    fprintf(stderr, "error%s%s%s: %s\n", tag ? " [" : "", tag ? tag : "", tag ? "]" : "", msg);
    cli_hosts_abort(st, msg);
    return tl_status_is_input_error(st) ? EXIT_BAD_INPUT : EXIT_RUNTIME;
}

int cli_usage_error(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *tag = cli_hosts_tag();
    fprintf(stderr, "error%s%s%s: %s\n(run `tpuloop help` for usage)\n", tag ? " [" : "", tag ? tag : "", tag ? "]" : "",
            msg);
    cli_hosts_abort(TL_EINVAL, msg);
    return EXIT_BAD_INPUT;
}

/* ---- usage and help ------------------------------------------------------ */

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *synopsis; /* one or more "tpuloop ..." lines, each "\n"-ended */
    const char *summary;  /* what `tpuloop help` says of it */
    const char *details;  /* what `tpuloop help NAME` and `NAME --help` add */
} command;

static int cmd_help(int argc, char **argv);
static int cmd_version(int argc, char **argv);

static const command commands[] = {
    {"train", cli_train,
     "tpuloop train [FILE] [--name=value ...] [--summary_json=OUT] [--predict] [--predictions_out=F]\n",
     "train the config's model in device loops; evaluate; print a JSON summary line",
     "Trains the configuration's model (model_name) on its input (the input section) in device loops of\n"
     "iterations_per_loop steps, to train_steps (counted from a restored step), max_steps, or the end of\n"
     "the input (epochs). With model_dir it resumes from the latest valid checkpoint there and saves as\n"
     "save_checkpoints_steps / _secs say; SIGTERM or Ctrl-C stops at the next loop boundary after a\n"
     "checkpoint (a second Ctrl-C quits at once). Then it evaluates when the configuration has\n"
     "eval_batch_size and eval_steps, and ends with one JSON line on stdout (global_step, loss,\n"
     "examples_per_sec, eval, params_digest, ...).\n"
     "  --summary_json=OUT   also write the JSON line to OUT\n"
     "  --predict            then predict the test set (needs predict_batch_size)\n"
     "  --predictions_out=F  where: .csv, or JSON Lines for .jsonl/.json (default predictions.jsonl)\n"},
    {"train_and_evaluate", cli_train_and_evaluate,
     "tpuloop train_and_evaluate [FILE] [--name=value ...] [--summary_json=OUT] [--predict] [--predictions_out=F]\n",
     "train, evaluating the checkpoints as they come (TensorFlow's train_and_evaluate)",
     "Trains as train does and evaluates the checkpoints it saves, as tf.estimator.train_and_evaluate does\n"
     "locally: a new checkpoint once throttle_secs (default 600) passed since the last evaluation, or\n"
     "every eval_every_n_steps steps (checkpoints are then saved there too), and the final one. Each\n"
     "evaluation (eval_batch_size, eval_steps) is printed and written to model_dir/eval for TensorBoard.\n"
     "With best_exporter, a checkpoint whose loss is the lowest yet is kept in model_dir/export/best\n"
     "(exports_to_keep of them). Needs model_dir. The JSON line adds \"evaluations\", the last \"eval\" and\n"
     "\"best_export\".\n"
     "  --summary_json=OUT   also write the JSON line to OUT\n"
     "  --predict            then predict the test set (needs predict_batch_size)\n"
     "  --predictions_out=F  where: .csv, or JSON Lines for .jsonl/.json (default predictions.jsonl)\n"},
    {"evaluate", cli_evaluate, "tpuloop evaluate [FILE] [--name=value ...] [--checkpoint=CKPT] [--summary_json=OUT]\n",
     "evaluate the latest valid checkpoint of model_dir (or CKPT); print the metrics as JSON",
     "Builds the model as train does, loads the latest valid checkpoint of model_dir (or CKPT: a file,\n"
     "or its TensorFlow prefix such as model_dir/model.ckpt-1000), evaluates eval_steps batches of\n"
     "eval_batch_size from the evaluation input (eval_files, or files), writes the metrics to\n"
     "model_dir/eval for TensorBoard and prints them as one JSON line with params_digest.\n"
     "  --checkpoint=CKPT    evaluate this checkpoint instead of model_dir's latest\n"
     "  --summary_json=OUT   also write the JSON line to OUT\n"},
    {"predict", cli_predict,
     "tpuloop predict [FILE] [--name=value ...] [--checkpoint=CKPT] [--predictions_out=F] [--summary_json=OUT]\n",
     "predict the test set with a checkpoint; write the predictions",
     "Builds the model as train does, loads the latest valid checkpoint of model_dir (or CKPT), predicts\n"
     "every example of the prediction input (eval_files, or files) in batches of predict_batch_size and\n"
     "writes one row per example: index, class and class probabilities.\n"
     "  --checkpoint=CKPT    predict with this checkpoint instead of model_dir's latest\n"
     "  --predictions_out=F  .csv, or JSON Lines for .jsonl/.json (default predictions.jsonl)\n"
     "  --summary_json=OUT   also write the JSON summary line to OUT\n"},
    {"config", cli_config, "tpuloop config [FILE] [--name=value ...] [--json]\n",
     "print the resolved configuration, the topology and the input plans",
     "Resolves the configuration as train would (defaults, FILE, the environment, --flags) and prints\n"
     "every value with where it came from, the topology (hosts, devices, replicas), the input plan of\n"
     "train, eval and predict, and the embedding tables with their memory; `tpuloop help options`\n"
     "lists every option.\n"
     "  --json               as one JSON document\n"},
    {"ckpt", cli_ckpt,
     "tpuloop ckpt list MODEL_DIR [--json]\n"
     "tpuloop ckpt inspect CKPT [--tensor=NAME] [--all_values] [--json]\n",
     "list a model_dir's checkpoints; inspect one",
     "list: every checkpoint of a model_dir: step, size, valid or why not, and the one a train resumes\n"
     "from. inspect: a checkpoint's metadata, checksums and tensors (CKPT: a file or its TensorFlow\n"
     "prefix), or with --tensor one tensor's values (--all_values: every value).\n"},
    {"data", cli_data,
     "tpuloop data inspect FILE... [--records=N] [--json] [--compression=AUTO|GZIP|ZLIB|NONE]\n"
     "tpuloop data convert --from=idx|csv|criteo INPUT... --out=FILE [--compression=GZIP|ZLIB|NONE]\n"
     "             [--shards=N] [--labels=IDX] [--columns=NAME:TYPE,... --label_column=NAME]\n"
     "             [--vocab_sizes=V|V1,...,V26]\n",
     "inspect TFRecord files; convert IDX, CSV or Criteo TSV to tf.Example TFRecord",
     "inspect: compression, records, CRCs and the tf.Example or SequenceExample schema of TFRecord\n"
     "files; --records=N prints the first N records as JSON lines.\n"
     "convert: writes IDX images (+ labels), CSV rows or Criteo TSV lines as tf.Example TFRecord (GZIP\n"
     "for a .gz name), atomically; the shard tag goes before the extensions, as Beam's WriteToTFRecord\n"
     "puts it: --shards=8 --out=d.tfrecord.gz\n"
     "writes d-00000-of-00008.tfrecord.gz ... d-00007-of-00008.tfrecord.gz\n"},
    {"devices", cli_devices, "tpuloop devices [--devices=N] [--num_hosts=H] [--json]\n", "list the devices",
     "One device per core of the affinity mask, or --devices=N virtual devices per host\n"
     "(TPULOOP_DEVICE_COUNT=N).\n"},
    {"help", cmd_help, "tpuloop help [COMMAND | options]\n", "this text, a command's help, or every option",
     "`tpuloop help options` (or `help config`'s second part) lists every configuration option: its file\n"
     "key, flag, default, allowed values and meaning.\n"},
    {"version", cmd_version, "tpuloop version\n", "print the version", ""},
};
#define NUM_COMMANDS (int)(sizeof commands / sizeof commands[0])

static const command *find_command(const char *name)
{
    for (int i = 0; i < NUM_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

static void print_usage(FILE *f)
{
    fprintf(f, "usage: tpuloop <command> [args]   (tpuloop help <command>, or <command> --help)\n\ncommands:\n");
    for (int i = 0; i < NUM_COMMANDS; i++) {
        /* Each synopsis line without its "tpuloop ", then the summary. */
        for (const char *p = commands[i].synopsis; *p != '\0';) {
            const char *nl = strchr(p, '\n');
            int len = nl != NULL ? (int)(nl - p) : (int)strlen(p);
            int skip = strncmp(p, "tpuloop ", 8) == 0 ? 8 : 0;
            fprintf(f, "  %.*s\n", len - skip, p + skip);
            p += nl != NULL ? len + 1 : len;
        }
        fprintf(f, "                 %s\n", commands[i].summary);
    }
    fprintf(f, "\n"
               "Configuration sources, later wins: defaults, FILE, TPULOOP_DEVICE_COUNT and TF_CONFIG,\n"
               "--flags. `tpuloop help options` lists every option. Exit status: 0 ok, 2 bad configuration\n"
               "or arguments, 1 runtime failure.\n");
}

static int print_options(void)
{
    char *text;
    tl_status st = tl_config_help(&text);
    if (st != TL_OK)
        return cli_fail(st);
    fputs(text, stdout);
    tl_free_string(text);
    return 0;
}

static void print_command_help(const command *c)
{
    /* "usage: " before the first line, its width of spaces before the others */
    const char *p = c->synopsis;
    for (int line = 0; *p != '\0'; line++) {
        const char *nl = strchr(p, '\n');
        int len = nl != NULL ? (int)(nl - p) : (int)strlen(p);
        printf("%s%.*s\n", line == 0 ? "usage: " : "       ", len, p);
        p += nl != NULL ? len + 1 : len;
    }
    printf("\n%s", c->details);
    if (c->run == cli_train || c->run == cli_train_and_evaluate || c->run == cli_evaluate || c->run == cli_predict ||
        c->run == cli_config)
        printf("\nFILE is a JSON configuration; --name=value sets any configuration option (`tpuloop help\n"
               "options` lists them). Sources, later wins: defaults, FILE, the environment, --flags.\n");
}

static int cmd_help(int argc, char **argv)
{
    if (argc == 0) {
        print_usage(stdout);
        return 0;
    }
    if (strcmp(argv[0], "options") == 0)
        return print_options();
    const command *c = find_command(argv[0]);
    if (c == NULL)
        return cli_usage_error("no command '%s'; `tpuloop help` lists them", argv[0]);
    print_command_help(c);
    if (c->run == cli_config) { /* `help config` has always listed the options too */
        printf("\n");
        return print_options();
    }
    return 0;
}

static int cmd_version(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("tpuloop %s\n", TL_VERSION_STRING);
    return 0;
}

/* A model_dir that holds a config.json (a run's resolved configuration) is
 * a source too, below FILE, the environment and the flags: `evaluate`,
 * `predict` and a resumed `train` on it need no more than --model_dir. What
 * the run sets otherwise is named. */
static tl_status reuse_model_dir(tl_config *cfg)
{
    const char *dir = tl_config_get(cfg)->model_dir;
    bool found = false;
    if (dir == NULL)
        return TL_OK;
    char *copy = strdup(dir); /* the resolved values change under it */
    if (copy == NULL)
        return tl_error(TL_ENOMEM, "out of memory");
    tl_status st = tl_config_load_model_dir(cfg, copy, &found);
    free(copy);
    if (st != TL_OK || !found || (st = tl_config_resolve(cfg)) != TL_OK)
        return st;
    char *conflicts = NULL;
    if (tl_config_model_dir_conflicts(cfg, &conflicts) == TL_OK && conflicts != NULL && cli_host0())
        fprintf(stderr, "warning: this run differs from its model_dir's configuration:\n%s", conflicts);
    tl_free_string(conflicts);
    return TL_OK;
}

/* Loads the configuration: defaults, FILE, environment, flags. Non-config
 * arguments other than those in `allowed` (NULL-terminated) are errors. */
int cli_load_config(int argc, char **argv, const char *const *allowed, bool allow_file, tl_config **out,
                    bool *flags_seen, int nflags)
{
    tl_config *probe = NULL, *cfg = NULL;
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    int nrest = 0, rc = 0;
    tl_status st;
    const char *file = NULL;
    if (rest == NULL) {
        fprintf(stderr, "error: out of memory\n");
        return EXIT_RUNTIME;
    }
    /* First pass: find what is not a config flag (FILE, --json ...). */
    if ((st = tl_config_create(&probe)) != TL_OK || (st = tl_config_apply_args(probe, argc, argv, &nrest, rest)) != TL_OK) {
        rc = cli_fail(st);
        goto out;
    }
    for (int i = 0; i < nrest; i++) {
        const char *a = rest[i];
        bool known = false;
        for (int k = 0; allowed && allowed[k]; k++) {
            size_t len = strlen(allowed[k]);
            /* "--x=" in allowed admits "--x=VALUE". */
            bool match = allowed[k][len - 1] == '=' ? strncmp(a, allowed[k], len) == 0 : strcmp(a, allowed[k]) == 0;
            if (match) {
                known = true;
                if (k < nflags)
                    flags_seen[k] = true;
            }
        }
        if (known)
            continue;
        if (strncmp(a, "--", 2) == 0) {
            const char *near = NULL;
            char hint[160] = "";
            if (tl_config_suggest(a, &near) == TL_OK && near != NULL)
                snprintf(hint, sizeof hint, "did you mean --%s? ", near);
            rc = cli_usage_error("unknown option '%s'; %s`tpuloop help options` lists the configuration options", a,
                                 hint);
            goto out;
        }
        if (!allow_file || file != NULL) {
            rc = cli_usage_error("unexpected argument '%s'", a);
            goto out;
        }
        file = a;
    }
    if ((st = tl_config_create(&cfg)) != TL_OK || (file && (st = tl_config_load_file(cfg, file)) != TL_OK) ||
        (st = tl_config_apply_env(cfg, (const char *const *)environ)) != TL_OK ||
        (st = tl_config_apply_args(cfg, argc, argv, NULL, rest)) != TL_OK || (st = tl_config_resolve(cfg)) != TL_OK ||
        (allow_file && (st = reuse_model_dir(cfg)) != TL_OK)) {
        rc = st == TL_ENOMEM ? cli_fail(st) : (cli_fail(st), EXIT_BAD_INPUT);
        tl_config_destroy(cfg);
        cfg = NULL;
        goto out;
    }
    *out = cfg;
out:
    tl_config_destroy(probe);
    free(rest);
    return rc;
}

int main(int argc, char **argv)
{
    tl_set_log_level(TL_LOG_WARN);
    if (argc < 2) {
        print_usage(stderr);
        return EXIT_BAD_INPUT;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0)
        name = "help";
    else if (strcmp(name, "--version") == 0)
        name = "version";
    const command *c = find_command(name);
    if (c == NULL)
        return cli_usage_error("unknown command '%s'; `tpuloop help` lists the commands", argv[1]);
    /* `COMMAND --help` anywhere before a bare "--": the command's help. */
    for (int i = 2; c->run != cmd_help && i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            print_command_help(c);
            return 0;
        }
    return c->run(argc - 2, argv + 2);
}
