/*
 * The explorer's clock (tests/model/README.md, "Time"): preloaded into the
 * reconciler daemon the explorer steps, so that the explorer, not the wall
 * clock, decides when heldUntil, the grace and the restore delay pass. Time
 * then moves only when a step says so: an example replays the same way on a
 * loaded machine, and waiting a grace costs nothing.
 *
 * EXPLORER_CLOCK_FILE names a file of 8 bytes, a native int64 of milliseconds
 * since the Unix epoch, that the explorer rewrites in place. While it holds
 * a value above 0, CLOCK_REALTIME (what vc_time_now_ms() reads) says that
 * instant; CLOCK_MONOTONIC, which the libraries' timeouts read, is left alone.
 *
 * EXPLORER_FAST_INTERVAL=1 makes the daemon's 100 ms naps between passes 1 ms
 * long: the explorer holds the daemon at its pause points, so the nap between
 * passes only wastes time. The acting daemon naps in poll() on its PostgreSQL
 * session (rc_outbox_idle(): a NOTIFY of the outbox wakes it), a standby in
 * nanosleep(); both slices are exactly 100 ms (RC_OUTBOX_SLICE_MS).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);
typedef int (*nanosleep_fn)(const struct timespec *, struct timespec *);
typedef int (*poll_fn)(struct pollfd *, nfds_t, int);

static clock_gettime_fn real_clock_gettime;
static nanosleep_fn real_nanosleep;
static poll_fn real_poll;
static const volatile int64_t *virtual_ms; /* the mapped file, or NULL: the real clock */
static int fast_interval;

__attribute__((constructor)) static void shim_init(void)
{
    const char *path = getenv("EXPLORER_CLOCK_FILE");
    const char *fast = getenv("EXPLORER_FAST_INTERVAL");
    void *p;
    int fd;

    real_clock_gettime = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
    real_nanosleep = (nanosleep_fn)dlsym(RTLD_NEXT, "nanosleep");
    real_poll = (poll_fn)dlsym(RTLD_NEXT, "poll");
    fast_interval = fast && fast[0] == '1';
    if (!path || !*path || (fd = open(path, O_RDONLY)) < 0)
        return;
    p = mmap(NULL, sizeof(int64_t), PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (p != MAP_FAILED)
        virtual_ms = p;
}

int clock_gettime(clockid_t id, struct timespec *ts)
{
    int64_t ms;

    if (virtual_ms && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE) &&
        (ms = *virtual_ms) > 0) {
        ts->tv_sec = (time_t)(ms / 1000);
        ts->tv_nsec = (long)(ms % 1000) * 1000000L;
        return 0;
    }
    return real_clock_gettime(id, ts);
}

int nanosleep(const struct timespec *req, struct timespec *rem)
{
    /* Only the nap between passes: exactly 100 ms. */
    if (fast_interval && req && req->tv_sec == 0 && req->tv_nsec == 100 * 1000000L) {
        struct timespec short_nap = {0, 1000000L};
        return real_nanosleep(&short_nap, rem);
    }
    return real_nanosleep(req, rem);
}

int poll(struct pollfd *fds, nfds_t nfds, int timeout_ms)
{
    /* Only the acting daemon's nap between passes, on its session: one fd, exactly 100 ms. */
    if (fast_interval && nfds == 1 && timeout_ms == 100)
        timeout_ms = 1;
    return real_poll(fds, nfds, timeout_ms);
}
