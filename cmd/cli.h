/*
 * cli.h - what the subcommands share: option parsing helpers, reporting of
 * tpc_err objects as "tpconv: error: ..." lines, and the exit codes.
 *
 * Exit status (also in --help, the README and the man page):
 *   0 ok; 1 verify found differences; 2 usage; 3 bad or unsupported input;
 *   4 output or I/O failure; 5 GPU/NCCL/MPI failure.
 */
#ifndef TPC_CLI_H
#define TPC_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tpc_err.h"

#define TPC_EXIT_HELP \
	"Exit status: 0 ok, 1 verify found differences, 2 usage error,\n" \
	"3 bad or unsupported input, 4 output or I/O failure, 5 GPU/NCCL/MPI failure.\n"

extern int tpc_cli_verbose; /* -v count; -1 with -q */

/* Print "tpconv: error: <formatted>" and return the exit status for e. */
int tpc_cli_fail(const tpc_err *e);
/* Print "tpconv: error: <msg>" for a usage problem with a hint; returns 2. */
int tpc_cli_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tpc_cli_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void tpc_cli_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Progress is shown when stderr is a terminal, or with --progress; never with -q. */
bool tpc_cli_progress_wanted(bool forced);

/* A horizontal bar for `value` out of `max`, `width` cells wide: block
 * characters on a terminal, '#' otherwise (no escape codes either way). */
void tpc_cli_bar(FILE *f, uint64_t value, uint64_t max, int width);

int cmd_inspect(int argc, char **argv);
int cmd_convert(int argc, char **argv);

#endif
