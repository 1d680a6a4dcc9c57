#include "vc_fault.h"

#ifdef VC_FAULT_POINTS
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vc_log.h"

void vc_fault(const char *name)
{
    const char *want = getenv("VOUCHER_FAULT");

    if (want && strcmp(want, name) == 0) {
        vc_error("fault point %s: killing the process (VOUCHER_FAULT)", name);
        raise(SIGKILL);
    }
}

/* Whether the comma-separated list names name exactly. */
static int listed(const char *list, const char *name)
{
    size_t n = strlen(name);

    for (const char *p = list; p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && memcmp(p, name, n) == 0)
            return 1;
        p = end ? end + 1 : NULL;
    }
    return 0;
}

void vc_pause(const char *name, const char *note)
{
    const char *dir = getenv("VOUCHER_PAUSE_DIR");
    const struct timespec tick = {0, 5 * 1000 * 1000};
    char path[512], pid[600];
    int fd, n;

    if (!listed(getenv("VOUCHER_PAUSE"), name))
        return;
    if (!dir || !*dir) {
        vc_error("pause point %s: VOUCHER_PAUSE_DIR is not set; not pausing", name);
        return;
    }
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0) {
        vc_error("pause point %s: %s: %s; not pausing", name, path, strerror(errno));
        return;
    }
    n = snprintf(pid, sizeof(pid), "%ld\n%s%s", (long)getpid(), note ? note : "", note ? "\n" : "");
    if (n >= (int)sizeof(pid))
        n = (int)sizeof(pid) - 1;
    if (write(fd, pid, (size_t)n) != n)
        vc_error("pause point %s: writing %s: %s", name, path, strerror(errno));
    close(fd);
    vc_info("pause point %s: waiting until %s is removed", name, path);
    while (access(path, F_OK) == 0)
        nanosleep(&tick, NULL);
    vc_info("pause point %s: going on", name);
}
#else
/* ISO C wants a translation unit to declare something. */
typedef int vc_fault_points_off;
#endif
