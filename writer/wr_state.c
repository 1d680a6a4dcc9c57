#include "wr_state.h"

#include <stddef.h>

const char *wr_outcome_name(int outcome)
{
    switch (outcome) {
#define WR_OUTCOME_CASE(name, value, text)                                                         \
    case (value):                                                                                  \
        return text;
        WR_OUTCOME_MAP(WR_OUTCOME_CASE)
#undef WR_OUTCOME_CASE
    }
    return "unknown";
}

const char *wr_status_name(wr_status_t st)
{
    static const char *const names[] = {"(none)", "RESERVED", "CONFIRMED", "RELEASED"};
    if ((int)st < 0 || (size_t)st >= sizeof(names) / sizeof(names[0]))
        return "(invalid)";
    return names[st];
}

/*
 * Rows: current status. Columns: VoucherReserved, VoucherConfirmed,
 * VoucherReleased. An event only moves a redemption forward (RESERVED <
 * CONFIRMED < RELEASED), never back, and repeating it is a no-op: that is
 * what makes any redelivery, and any reordering, end in the same row.
 */
static const wr_step_t steps[4][3] = {
    [WR_ST_NONE] =
        {
            {WR_ST_RESERVED, +1, WR_OUT_APPLIED},
            /* Confirmed first: the use is real (the order was paid); count it now. */
            {WR_ST_CONFIRMED, +1, WR_OUT_EARLY},
            /* Released first: remember the release so a late reservation is a no-op. */
            {WR_ST_RELEASED, 0, WR_OUT_TOMBSTONE},
        },
    [WR_ST_RESERVED] =
        {
            {WR_ST_RESERVED, 0, WR_OUT_NOOP},
            {WR_ST_CONFIRMED, 0, WR_OUT_APPLIED},
            {WR_ST_RELEASED, -1, WR_OUT_APPLIED},
        },
    [WR_ST_CONFIRMED] =
        {
            {WR_ST_CONFIRMED, 0, WR_OUT_NOOP},
            {WR_ST_CONFIRMED, 0, WR_OUT_NOOP},
            {WR_ST_RELEASED, -1, WR_OUT_APPLIED},
        },
    [WR_ST_RELEASED] =
        {
            {WR_ST_RELEASED, 0, WR_OUT_NOOP},
            {WR_ST_RELEASED, 0, WR_OUT_NOOP},
            {WR_ST_RELEASED, 0, WR_OUT_NOOP},
        },
};

wr_step_t wr_redemption_step(wr_status_t cur, vc_event_type_t type)
{
    wr_step_t bad = {cur, 0, WR_OUT_POISON};

    if ((int)cur < WR_ST_NONE || cur > WR_ST_RELEASED || type < VC_EV_RESERVED ||
        type > VC_EV_RELEASED)
        return bad;
    return steps[cur][type - VC_EV_RESERVED];
}
