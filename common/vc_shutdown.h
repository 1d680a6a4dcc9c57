/*
 * The bound on a clean stop. After SIGTERM a daemon finishes what it has in
 * hand; if that takes longer than VOUCHER_SHUTDOWN_TIMEOUT (a stuck backend,
 * say), the watchdog logs it and ends the process with status 1, so an
 * orchestrator's rolling restart never hangs on it. What was not finished is
 * safe by design: offsets are stored only after COMMIT, and a 201 is sent
 * only after Kafka's acknowledgement.
 */
#ifndef VC_SHUTDOWN_H
#define VC_SHUTDOWN_H

#include <signal.h>
#include <stdint.h>

/*
 * Starts, at start-up, a thread that watches *stop (set by the daemon's
 * signal handler; borrowed for the process's life): from the moment it is
 * set, the process has timeout_ms to exit by itself, or the watchdog exits
 * it with status 1. Returns 0, or a negative error when no thread started.
 */
int vc_shutdown_watch(volatile sig_atomic_t *stop, int64_t timeout_ms);

#endif
