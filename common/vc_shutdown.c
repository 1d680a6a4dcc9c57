#include "vc_shutdown.h"
#include "vc_error.h"
#include "vc_log.h"
#include "vc_time.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t *watched;
static int64_t watchdog_ms;

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static void *watchdog_main(void *arg)
{
    int64_t deadline;

    (void)arg;
    while (!*watched)
        sleep_ms(100);
    deadline = vc_time_mono_ms() + watchdog_ms;
    while (vc_time_mono_ms() < deadline)
        sleep_ms(100);
    vc_error("shutdown took longer than %lld ms (VOUCHER_SHUTDOWN_TIMEOUT): exiting now",
             (long long)watchdog_ms);
    _exit(1);
    return NULL;
}

int vc_shutdown_watch(volatile sig_atomic_t *stop, int64_t timeout_ms)
{
    pthread_t t;

    watched = stop;
    watchdog_ms = timeout_ms;
    if (pthread_create(&t, NULL, watchdog_main, NULL) != 0)
        return VC_ERR_IO;
    pthread_detach(t);
    return 0;
}
