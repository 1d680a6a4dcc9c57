/*
 * The planner over JSON, for `voucher-reconciler plan` and for tests that
 * drive the real parts step by step (tests/model): a snapshot of what one pass
 * read in, the verdicts and planned repairs out. proto/reconciler-plan.md
 * describes both documents. Pure: no I/O.
 */
#ifndef RC_PLAN_JSON_H
#define RC_PLAN_JSON_H

#include <stddef.h>

/*
 * Plans from the snapshot json (len bytes). Returns 0 with *out a malloc'd
 * NUL-terminated JSON document (the caller frees it) and *outlen its length;
 * VC_ERR_INVALID with err saying which field is wrong; or VC_ERR_NOMEM.
 */
int rc_plan_json(const char *json, size_t len, char **out, size_t *outlen, char *err,
                 size_t errlen);

/*
 * `voucher-reconciler plan [FILE]`: reads the snapshot from FILE, or stdin
 * when it is absent or "-", and prints the plan on stdout. Returns the exit
 * status: 0, or 2 with a message on stderr.
 */
int rc_plan_cli(int argc, char **argv);

#endif
