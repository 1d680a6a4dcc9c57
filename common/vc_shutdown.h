/*
 * The bound on a clean stop, one for the three daemons. After SIGTERM a
 * daemon finishes what it has in hand; if that takes longer than
 * VOUCHER_SHUTDOWN_TIMEOUT (a stuck backend, say), the watchdog logs it and
 * ends the process with status 1, so an orchestrator's rolling restart never
 * hangs on it. What was not finished is safe by design: offsets are stored
 * only after COMMIT, and a 201 is sent only after Kafka's acknowledgement.
 *
 * A daemon's stop flag is its own atomic_int (read by its loops on any
 * thread): a signal handler may set it, because atomic_int is lock-free (a
 * volatile sig_atomic_t is defined only for the thread the handler
 * interrupted, and the watchdog and the loops run on others). The watchdog
 * owns nothing of the daemon's: no pointer to its stack or its flag.
 */
#ifndef VC_SHUTDOWN_H
#define VC_SHUTDOWN_H

#include <stdatomic.h>
#include <stdint.h>

/*
 * Starts the watchdog thread, once, at start-up (before any signal can call
 * vc_shutdown_begin()). It sleeps until vc_shutdown_begin(), then gives the
 * process timeout_ms to exit by itself before it exits it with status 1.
 * Returns 0, or a negative VC_ERR_* when no thread started.
 */
int vc_shutdown_watch(int64_t timeout_ms);

/*
 * Starts the countdown: the shutdown began now. Async-signal-safe (an atomic
 * store and sem_post()), so a signal handler may call it; later calls, and
 * calls without a watchdog, do nothing more.
 */
void vc_shutdown_begin(void);

/*
 * The countdown's end on the vc_time_mono_ms() clock, or 0 before
 * vc_shutdown_begin(): what is left of it is the time a daemon may still
 * spend on a last flush.
 */
int64_t vc_shutdown_deadline_ms(void);

#endif
