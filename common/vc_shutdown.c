#include "vc_shutdown.h"
#include "vc_error.h"
#include "vc_log.h"
#include "vc_time.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

/* A signal handler stores into these: they must not need a lock. */
_Static_assert(ATOMIC_INT_LOCK_FREE == 2 && ATOMIC_LLONG_LOCK_FREE == 2,
               "the shutdown flags must be lock-free to be set from a signal handler");

/*
 * Process-wide, and written before the thread starts (timeout_ms) or
 * atomically (the rest): the watchdog reads nothing that may go away.
 */
static int64_t timeout_ms;
static atomic_int started, begun;
static atomic_llong begun_ms; /* vc_time_mono_ms() at vc_shutdown_begin() */
static sem_t wake;            /* posted once the shutdown began and the thread runs */

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static void *watchdog_main(void *arg)
{
    int64_t left;

    (void)arg;
    while (sem_wait(&wake) != 0)
        ; /* EINTR */
    while ((left = vc_shutdown_deadline_ms() - vc_time_mono_ms()) > 0)
        sleep_ms(left > 200 ? 200 : left);
    vc_error("shutdown took longer than %lld ms (VOUCHER_SHUTDOWN_TIMEOUT): exiting now",
             (long long)timeout_ms);
    _exit(1);
    return NULL;
}

int vc_shutdown_watch(int64_t timeout)
{
    pthread_t t;
    sigset_t all, old;
    int rc;

    if (atomic_load(&started))
        return 0;
    timeout_ms = timeout;
    if (sem_init(&wake, 0, 0) != 0)
        return VC_ERR_IO;
    /* Signals go to the daemon's threads, never to the watchdog. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&t, NULL, watchdog_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        sem_destroy(&wake);
        return VC_ERR_IO;
    }
    pthread_detach(t);
    /* A signal that came before the thread did still starts the countdown. */
    if (atomic_exchange(&started, 1) == 0 && atomic_load(&begun))
        sem_post(&wake);
    return 0;
}

void vc_shutdown_begin(void)
{
    int saved = errno; /* a signal handler must leave errno as it found it */

    if (atomic_load(&begun) == 0) {
        atomic_store(&begun_ms, (long long)vc_time_mono_ms());
        atomic_store(&begun, 1);
        if (atomic_load(&started))
            sem_post(&wake);
    }
    errno = saved;
}

int64_t vc_shutdown_deadline_ms(void)
{
    return atomic_load(&begun) ? (int64_t)atomic_load(&begun_ms) + timeout_ms : 0;
}
