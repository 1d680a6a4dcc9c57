/*
 * `voucher-writer dlt ...`: reading and replaying the dead-letter topic.
 */
#ifndef WR_CLI_H
#define WR_CLI_H

#include <signal.h>

#include "wr_writer.h"

/*
 * Runs `dlt list`, `dlt show OFFSET` or `dlt replay ...` with args (argv
 * after "dlt", argc of them). Output goes to stdout, progress to stderr.
 * Returns the process exit status: 0 ok, 1 failure, 2 usage error.
 */
int wr_cli_dlt(const wr_config_t *cfg, int argc, char **argv, atomic_int *stop);

#endif
