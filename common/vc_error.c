#include "vc_error.h"

#include <stdio.h>
#include <stdlib.h>

const char *vc_strerror(int code)
{
    switch (code) {
    case 0:
        return "success";
#define VC_ERR_MSG(name, value, msg)                                                               \
    case value:                                                                                    \
        return msg;
        VC_ERRNO_MAP(VC_ERR_MSG)
#undef VC_ERR_MSG
    }
    return "unknown error";
}

void vc_assert_fail(const char *expr, const char *file, int line)
{
    fprintf(stderr, "{\"level\":\"fatal\",\"message\":\"assertion failed: %s at %s:%d\"}\n", expr,
            file, line);
    fflush(stderr);
    abort();
}
