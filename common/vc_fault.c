#include "vc_fault.h"

#ifdef VC_FAULT_POINTS
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "vc_log.h"

void vc_fault(const char *name)
{
    const char *want = getenv("VOUCHER_FAULT");

    if (want && strcmp(want, name) == 0) {
        vc_error("fault point %s: killing the process (VOUCHER_FAULT)", name);
        raise(SIGKILL);
    }
}
#else
/* ISO C wants a translation unit to declare something. */
typedef int vc_fault_points_off;
#endif
