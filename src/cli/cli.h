/* cli.h — what the command's files share. The command uses only the public
 * API (include/tpuloop/). */
#ifndef TL_CLI_H
#define TL_CLI_H

#include <stdbool.h>

#include "tpuloop/tpuloop.h"

#define EXIT_BAD_INPUT 2
#define EXIT_RUNTIME 1

/* Prints "error: <message>" and returns the exit status for st. */
int cli_fail(tl_status st);
/* Prints "error: ..." and a pointer to `tpuloop help`; returns 2. */
int cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Loads and resolves the configuration from [FILE], the environment and the
 * flags; arguments in `allowed` (exact, or a "--x=" prefix) are let through
 * and marked in flags_seen[0..nflags). Returns an exit status (0: *out set). */
int cli_load_config(int argc, char **argv, const char *const *allowed, bool allow_file, tl_config **out,
                    bool *flags_seen, int nflags);

int cli_train(int argc, char **argv);

#endif /* TL_CLI_H */
