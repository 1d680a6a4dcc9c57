#include "vc_redemption.h"

#include <stddef.h>
#include <string.h>

const char *vc_rd_outcome_name(int outcome)
{
    switch (outcome) {
#define VC_RD_OUTCOME_CASE(name, value, text)                                                      \
    case (value):                                                                                  \
        return text;
        VC_RD_OUTCOME_MAP(VC_RD_OUTCOME_CASE)
#undef VC_RD_OUTCOME_CASE
    }
    return "unknown";
}

static const char *const status_names[VC_RD_STATUS_COUNT] = {"(none)", "RESERVED", "CONFIRMED",
                                                             "RELEASED"};

const char *vc_rd_status_name(vc_rd_status_t st)
{
    if ((int)st < 0 || st >= VC_RD_STATUS_COUNT)
        return "(invalid)";
    return status_names[st];
}

vc_rd_status_t vc_rd_status_parse(const char *s)
{
    for (int st = VC_RD_RESERVED; st < VC_RD_STATUS_COUNT; st++)
        if (strcmp(s, status_names[st]) == 0)
            return (vc_rd_status_t)st;
    return VC_RD_NONE;
}

int vc_rd_counts(vc_rd_status_t s)
{
    return s == VC_RD_RESERVED || s == VC_RD_CONFIRMED;
}

/*
 * Rows: current status. Columns: VoucherReserved, VoucherConfirmed,
 * VoucherReleased. An event only moves a redemption forward (RESERVED <
 * CONFIRMED < RELEASED), never back, and repeating it is a no-op: that is
 * what makes any redelivery, and any reordering, end in the same row.
 */
static const vc_rd_step_t steps[VC_RD_STATUS_COUNT][3] = {
    [VC_RD_NONE] =
        {
            {VC_RD_RESERVED, +1, VC_RD_OUT_APPLIED},
            /* Confirmed first: the use is real (the order was paid); count it now. */
            {VC_RD_CONFIRMED, +1, VC_RD_OUT_EARLY},
            /* Released first: remember the release so a late reservation is a no-op. */
            {VC_RD_RELEASED, 0, VC_RD_OUT_TOMBSTONE},
        },
    [VC_RD_RESERVED] =
        {
            {VC_RD_RESERVED, 0, VC_RD_OUT_NOOP},
            {VC_RD_CONFIRMED, 0, VC_RD_OUT_APPLIED},
            {VC_RD_RELEASED, -1, VC_RD_OUT_APPLIED},
        },
    [VC_RD_CONFIRMED] =
        {
            {VC_RD_CONFIRMED, 0, VC_RD_OUT_NOOP},
            {VC_RD_CONFIRMED, 0, VC_RD_OUT_NOOP},
            {VC_RD_RELEASED, -1, VC_RD_OUT_APPLIED},
        },
    [VC_RD_RELEASED] =
        {
            {VC_RD_RELEASED, 0, VC_RD_OUT_NOOP},
            {VC_RD_RELEASED, 0, VC_RD_OUT_NOOP},
            {VC_RD_RELEASED, 0, VC_RD_OUT_NOOP},
        },
};

vc_rd_step_t vc_rd_step(vc_rd_status_t cur, vc_event_type_t type)
{
    vc_rd_step_t bad = {cur, 0, VC_RD_OUT_POISON};

    if ((int)cur < VC_RD_NONE || cur >= VC_RD_STATUS_COUNT || type < VC_EV_RESERVED ||
        type > VC_EV_RELEASED)
        return bad;
    return steps[cur][type - VC_EV_RESERVED];
}
