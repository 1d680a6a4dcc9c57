/* How vc-load reports: one TSV line per attempt, and the summary as text or JSON. */
#ifndef VL_REPORT_H
#define VL_REPORT_H

#include <stdio.h>

#include "vl_load.h"

/* The status column: "201", "409", ..., "timeout" or "error". buf needs 16 bytes. */
const char *vl_status_name(int status, char *buf, size_t cap);

/* Writes the TSV header line (starting with '#') that names the columns. */
void vl_tsv_header(FILE *out);

/* Writes one TSV line for a finished attempt. */
void vl_tsv_write(FILE *out, const vl_result_t *r);

/* Writes the summary as aligned text. addr is what was loaded ("127.0.0.1:15410"). */
void vl_summary_text(FILE *out, const vl_options_t *opt, const char *addr, const vl_stats_t *s);

/* Writes the summary as one JSON object and a newline. Returns 0 or a VC_ERR_*. */
int vl_summary_json(FILE *out, const vl_options_t *opt, const char *addr, const vl_stats_t *s);

#endif
