/*
 * libFuzzer harness of the reconciler's planner over JSON
 * (reconciler/rc_plan_json.c): any bytes as the snapshot of one pass, as
 * `voucher-reconciler plan` and the explorer hand it in. A snapshot is either
 * refused with a message, or planned; a plan is a JSON document (yajl parses
 * it back) and the same snapshot gives the same plan: the planner is pure.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_tree.h>

#include "rc_plan_json.h"
#include "vc_error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256], perr[256], *out = NULL, *again = NULL;
    size_t outlen = 0, againlen = 0;
    yajl_val doc;
    int rc;

    err[0] = '\0';
    rc = rc_plan_json((const char *)data, size, &out, &outlen, err, sizeof(err));
    if (rc == VC_ERR_INVALID) {
        if (err[0] == '\0') {
            fprintf(stderr, "fuzz_plan: a snapshot refused without a message\n");
            abort();
        }
        return 0;
    }
    if (rc != 0)
        return 0; /* VC_ERR_NOMEM: nothing to check */
    if (!out || strlen(out) != outlen) {
        fprintf(stderr, "fuzz_plan: the plan's length is not its text's\n");
        abort();
    }
    if (!(doc = yajl_tree_parse(out, perr, sizeof(perr))) || !YAJL_IS_OBJECT(doc)) {
        fprintf(stderr, "fuzz_plan: the plan is not a JSON object (%s): %s\n", perr, out);
        abort();
    }
    yajl_tree_free(doc);
    if (rc_plan_json((const char *)data, size, &again, &againlen, err, sizeof(err)) != 0 ||
        againlen != outlen || memcmp(again, out, outlen) != 0) {
        fprintf(stderr, "fuzz_plan: the same snapshot planned twice gave two plans\n");
        abort();
    }
    free(again);
    free(out);
    return 0;
}
