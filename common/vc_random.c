#include "vc_random.h"

#include <errno.h>
#include <sys/random.h>

#include "vc_error.h"

int vc_random_fill(void *arg, unsigned char *buf, size_t len)
{
    (void)arg;
    while (len > 0) {
        ssize_t n = getrandom(buf, len, 0);

        if (n < 0) {
            if (errno == EINTR)
                continue;
            return VC_ERR_IO;
        }
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}
