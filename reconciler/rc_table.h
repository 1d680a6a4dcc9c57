/* The table `voucher-reconciler --once` prints: one row per voucher of a pass. */
#ifndef RC_TABLE_H
#define RC_TABLE_H

#include <stdio.h>

#include "rc_plan.h"

/* Writes the header line. */
void rc_table_header(FILE *table);

/* Writes v's row: its numbers, in flight, parked, releasing, unsent, and its verdict. */
void rc_table_row(FILE *table, const rc_voucher_t *v);

#endif
