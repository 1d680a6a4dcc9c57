/*
 * C11 threads on pthreads, for ThreadSanitizer runs (LD_PRELOAD).
 *
 * Debian's librdkafka 2.0.2 creates its threads and takes its locks with
 * glibc's C11 threads (thrd_create, mtx_lock, cnd_wait, ...). glibc
 * implements them on its internal pthread functions, which gcc 12's
 * ThreadSanitizer does not intercept: it never learns of librdkafka's
 * threads, and a TSan daemon crashes when one of them calls back into our
 * code (a delivery report, a log line). Preloaded, this library defines
 * those functions over the public pthread functions, which TSan does
 * intercept, so it sees librdkafka's threads and its locks' ordering.
 *
 * glibc lays mtx_t, cnd_t, thrd_t and once_flag out as pthread_mutex_t,
 * pthread_cond_t, pthread_t and pthread_once_t (checked below). Used by
 * tests/integration/test_gateway_tsan.sh only; not for production.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <threads.h>
#include <time.h>

_Static_assert(sizeof(mtx_t) == sizeof(pthread_mutex_t), "mtx_t is not a pthread mutex");
_Static_assert(sizeof(cnd_t) == sizeof(pthread_cond_t), "cnd_t is not a pthread condition");
_Static_assert(sizeof(thrd_t) == sizeof(pthread_t), "thrd_t is not a pthread_t");
_Static_assert(sizeof(once_flag) == sizeof(pthread_once_t), "once_flag is not a pthread_once_t");

/*
 * librdkafka initialises a mutex or a condition in one thread and hands the
 * object holding it to another through its own atomics (a reference count, a
 * queue), which TSan cannot see: it then reports the other thread's first
 * lock as racing with the init. An init is always published before any use
 * in a correct program, so we tell TSan so: each init releases on the
 * object's address, each use acquires it first. This orders the init only;
 * the lock's own ordering is still TSan's. Weak, so the library also loads
 * into a process without TSan, where these are no-ops.
 */
void __tsan_acquire(void *addr) __attribute__((weak));
void __tsan_release(void *addr) __attribute__((weak));

static void published(void *obj)
{
    if (__tsan_release)
        __tsan_release(obj);
}

static void *seen(void *obj)
{
    if (__tsan_acquire)
        __tsan_acquire(obj);
    return obj;
}

/* C11 results from pthread error numbers. */
static int result(int rc)
{
    switch (rc) {
    case 0:
        return thrd_success;
    case EBUSY:
        return thrd_busy;
    case ETIMEDOUT:
        return thrd_timedout;
    case ENOMEM:
    case EAGAIN:
        return thrd_nomem;
    default:
        return thrd_error;
    }
}

typedef struct {
    thrd_start_t func;
    void *arg;
} start_t;

static void *start_cb(void *p)
{
    start_t s = *(start_t *)p;

    free(p);
    return (void *)(intptr_t)s.func(s.arg);
}

int thrd_create(thrd_t *thr, thrd_start_t func, void *arg)
{
    start_t *s = malloc(sizeof(*s));
    int rc;

    if (!s)
        return thrd_nomem;
    s->func = func;
    s->arg = arg;
    if ((rc = pthread_create((pthread_t *)thr, NULL, start_cb, s)) != 0)
        free(s);
    return result(rc);
}

int thrd_join(thrd_t thr, int *res)
{
    void *value;
    int rc = pthread_join((pthread_t)thr, &value);

    if (rc == 0 && res)
        *res = (int)(intptr_t)value;
    return result(rc);
}

int thrd_detach(thrd_t thr)
{
    return result(pthread_detach((pthread_t)thr));
}

void thrd_exit(int res)
{
    pthread_exit((void *)(intptr_t)res);
}

int mtx_init(mtx_t *m, int type)
{
    pthread_mutexattr_t attr;
    int rc;

    pthread_mutexattr_init(&attr);
    if (type & mtx_recursive)
        pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    rc = pthread_mutex_init((pthread_mutex_t *)m, &attr);
    pthread_mutexattr_destroy(&attr);
    published(m);
    return result(rc);
}

int mtx_lock(mtx_t *m)
{
    return result(pthread_mutex_lock(seen(m)));
}

int mtx_trylock(mtx_t *m)
{
    return result(pthread_mutex_trylock(seen(m)));
}

int mtx_timedlock(mtx_t *restrict m, const struct timespec *restrict ts)
{
    return result(pthread_mutex_timedlock(seen(m), ts));
}

int mtx_unlock(mtx_t *m)
{
    return result(pthread_mutex_unlock((pthread_mutex_t *)m));
}

void mtx_destroy(mtx_t *m)
{
    pthread_mutex_destroy((pthread_mutex_t *)m);
}

int cnd_init(cnd_t *c)
{
    int rc = pthread_cond_init((pthread_cond_t *)c, NULL);

    published(c);
    return result(rc);
}

int cnd_signal(cnd_t *c)
{
    return result(pthread_cond_signal(seen(c)));
}

int cnd_broadcast(cnd_t *c)
{
    return result(pthread_cond_broadcast(seen(c)));
}

int cnd_wait(cnd_t *c, mtx_t *m)
{
    return result(pthread_cond_wait(seen(c), (pthread_mutex_t *)m));
}

int cnd_timedwait(cnd_t *restrict c, mtx_t *restrict m, const struct timespec *restrict ts)
{
    return result(pthread_cond_timedwait(seen(c), (pthread_mutex_t *)m, ts));
}

void cnd_destroy(cnd_t *c)
{
    pthread_cond_destroy((pthread_cond_t *)c);
}

void call_once(once_flag *flag, void (*func)(void))
{
    pthread_once((pthread_once_t *)flag, func);
}
