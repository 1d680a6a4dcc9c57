#include "wr_cli.h"

#include <stdio.h>

int wr_cli_dlt(const wr_config_t *cfg, int argc, char **argv, volatile sig_atomic_t *stop)
{
    (void)cfg;
    (void)argc;
    (void)argv;
    (void)stop;
    fprintf(stderr, "voucher-writer: dlt: not implemented yet\n");
    return 2;
}
