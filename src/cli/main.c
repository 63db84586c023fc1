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
    fprintf(stderr, "error: %s\n", tl_last_error()[0] ? tl_last_error() : tl_strerror(st));
    return tl_status_is_input_error(st) ? EXIT_BAD_INPUT : EXIT_RUNTIME;
}

int cli_usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "error: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n(run `tpuloop help` for usage)\n");
    va_end(ap);
    return EXIT_BAD_INPUT;
}

static void print_usage(FILE *f)
{
    fprintf(f,
            "usage: tpuloop <command> [args]\n"
            "\n"
            "commands:\n"
            "  config [FILE] [--name=value ...] [--json]\n"
            "                 print the resolved configuration, the topology and the input plan\n"
            "                 of train, eval and predict (FILE: a JSON config)\n"
            "  train [FILE] [--name=value ...] [--summary_json=OUT] [--predict] [--predictions_out=F]\n"
            "                 train the config's model in device loops, evaluate it when the config\n"
            "                 has eval_batch_size and eval_steps, print a JSON summary line; --predict\n"
            "                 writes test-set predictions (.csv or JSON Lines, default predictions.jsonl).\n"
            "                 With model_dir it resumes from the latest valid checkpoint; SIGTERM or\n"
            "                 Ctrl-C stops at the next loop boundary after a checkpoint\n"
            "  evaluate [FILE] [--name=value ...] [--checkpoint=CKPT] [--summary_json=OUT]\n"
            "                 evaluate the latest valid checkpoint of model_dir (or CKPT) on eval_steps\n"
            "                 batches of the test set; print the metrics as one JSON line\n"
            "  predict [FILE] [--name=value ...] [--checkpoint=CKPT] [--predictions_out=F]\n"
            "                 predict the test set with the latest valid checkpoint of model_dir (or\n"
            "                 CKPT); write what `train --predict` writes\n"
            "  ckpt list MODEL_DIR [--json]\n"
            "                 every checkpoint of a model_dir: step, size, valid or why not, the latest\n"
            "  ckpt inspect CKPT [--tensor=NAME] [--all_values] [--json]\n"
            "                 a checkpoint's metadata, checksums and tensors; a tensor's values\n"
            "  data inspect FILE... [--records=N] [--json] [--compression=AUTO|GZIP|ZLIB|NONE]\n"
            "                 TFRecord files: compression, records, CRCs, the tf.Example or\n"
            "                 SequenceExample schema; --records=N prints the first N as JSON lines\n"
            "  data convert --from=idx|csv|criteo INPUT... --out=FILE [--compression=GZIP|ZLIB|NONE]\n"
            "               [--shards=N] [--labels=IDX] [--columns=NAME:TYPE,... --label_column=NAME]\n"
            "               [--vocab_sizes=V|V1,...,V26]\n"
            "                 write IDX images (+ labels), CSV rows or Criteo TSV lines as tf.Example\n"
            "                 TFRecord (GZIP for a .gz name), atomically; --shards=8 --out=d.tfrecord.gz\n"
            "                 writes d-00000-of-00008.tfrecord.gz ... d-00007-of-00008.tfrecord.gz\n"
            "  devices [--devices=N] [--num_hosts=H] [--json]\n"
            "                 list the devices\n"
            "  help [config]  this text, or every configuration option\n"
            "  version        print the version\n"
            "\n"
            "Configuration sources, later wins: defaults, FILE, TPULOOP_DEVICE_COUNT and TF_CONFIG,\n"
            "--flags. Exit status: 0 ok, 2 bad configuration or arguments, 1 runtime failure.\n");
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
            rc = cli_usage_error("unknown option '%s'; `tpuloop help config` lists the configuration options", a);
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
        (st = tl_config_apply_args(cfg, argc, argv, NULL, rest)) != TL_OK || (st = tl_config_resolve(cfg)) != TL_OK) {
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

static int cmd_help(int argc, char **argv)
{
    if (argc >= 1 && strcmp(argv[0], "config") == 0) {
        char *text;
        tl_status st = tl_config_help(&text);
        if (st != TL_OK)
            return cli_fail(st);
        fputs(text, stdout);
        tl_free_string(text);
        return 0;
    }
    if (argc >= 1)
        return cli_usage_error("no help on '%s'; try `tpuloop help` or `tpuloop help config`", argv[0]);
    print_usage(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    tl_set_log_level(TL_LOG_WARN);
    if (argc < 2) {
        print_usage(stderr);
        return EXIT_BAD_INPUT;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "config") == 0)
        return cli_config(argc - 2, argv + 2);
    if (strcmp(cmd, "train") == 0)
        return cli_train(argc - 2, argv + 2);
    if (strcmp(cmd, "evaluate") == 0)
        return cli_evaluate(argc - 2, argv + 2);
    if (strcmp(cmd, "predict") == 0)
        return cli_predict(argc - 2, argv + 2);
    if (strcmp(cmd, "ckpt") == 0)
        return cli_ckpt(argc - 2, argv + 2);
    if (strcmp(cmd, "data") == 0)
        return cli_data(argc - 2, argv + 2);
    if (strcmp(cmd, "devices") == 0)
        return cli_devices(argc - 2, argv + 2);
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0)
        return cmd_help(argc - 2, argv + 2);
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("tpuloop %s\n", TL_VERSION_STRING);
        return 0;
    }
    return cli_usage_error("unknown command '%s'", cmd);
}
