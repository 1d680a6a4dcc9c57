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

/* Writes all of len bytes of buf to fd; 0, or -1 with errno set. */
static int write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

void vc_pause(const char *name, const char *note, const char *detail)
{
    const char *dir = getenv("VOUCHER_PAUSE_DIR");
    const struct timespec tick = {0, 5 * 1000 * 1000};
    char path[512], tmp[520], pid[24];
    int fd, n, failed;

    if (!listed(getenv("VOUCHER_PAUSE"), name))
        return;
    if (!dir || !*dir) {
        vc_error("pause point %s: VOUCHER_PAUSE_DIR is not set; not pausing", name);
        return;
    }
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    /*
     * Written aside and renamed into place: a test that sees the file sees
     * all of it (the pid, the note and the detail), never a part.
     */
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0) {
        vc_error("pause point %s: %s: %s; not pausing", name, tmp, strerror(errno));
        return;
    }
    n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
    failed = write_all(fd, pid, (size_t)n) != 0;
    if (!failed && (note || detail))
        failed = write_all(fd, note ? note : "", note ? strlen(note) : 0) != 0 ||
                 write_all(fd, "\n", 1) != 0;
    if (!failed && detail)
        failed = write_all(fd, detail, strlen(detail)) != 0;
    if (failed)
        vc_error("pause point %s: writing %s: %s", name, tmp, strerror(errno));
    close(fd);
    if (rename(tmp, path) != 0) {
        vc_error("pause point %s: %s: %s; not pausing", name, path, strerror(errno));
        unlink(tmp);
        return;
    }
    vc_info("pause point %s: waiting until %s is removed", name, path);
    while (access(path, F_OK) == 0)
        nanosleep(&tick, NULL);
    vc_info("pause point %s: going on", name);
}
#else
/* ISO C wants a translation unit to declare something. */
typedef int vc_fault_points_off;
#endif
