/*
 * Prints the redemption transition table (common/vc_redemption.h), the oracle
 * redemption_oracle.py checks the writer's SQL against: one line per status
 * and event type, "STATUS TYPE NEXT DELTA OUTCOME" with the status names
 * PostgreSQL stores ("NONE" for no row), the type as the SQL takes it (1, 2,
 * 3) and the outcome's number as the SQL returns it.
 */
#include <stdio.h>

#include "vc_redemption.h"

int main(void)
{
    for (int st = VC_RD_NONE; st < VC_RD_STATUS_COUNT; st++)
        for (int t = VC_EV_RESERVED; t <= VC_EV_RELEASED; t++) {
            vc_rd_step_t s = vc_rd_step((vc_rd_status_t)st, (vc_event_type_t)t);
            printf("%s %d %s %d %d\n", st == VC_RD_NONE ? "NONE" : vc_rd_status_name(st), t,
                   s.next == VC_RD_NONE ? "NONE" : vc_rd_status_name(s.next), s.used_delta,
                   (int)s.outcome);
        }
    return 0;
}
