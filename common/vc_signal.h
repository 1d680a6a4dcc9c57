/*
 * How every daemon handles signals, one way for the three: SIGPIPE is
 * ignored (a write to a closed socket fails with EPIPE where it is made),
 * and the first SIGTERM or SIGINT starts the shutdown. Later stop signals are
 * ignored: the shutdown watchdog (vc_shutdown.h) bounds how long it takes.
 */
#ifndef VC_SIGNAL_H
#define VC_SIGNAL_H

/*
 * Called once, for the first SIGTERM or SIGINT, inside the signal handler
 * (on whichever thread the signal interrupted), after vc_shutdown_begin():
 * it may only do what is async-signal-safe, such as storing to a lock-free
 * atomic flag or calling uv_async_send().
 */
typedef void (*vc_signal_stop_cb)(int signum);

/*
 * Ignores SIGPIPE and, when on_stop is not NULL, routes SIGTERM and SIGINT
 * to it (with SA_RESTART, so that no blocking call fails with EINTR); with
 * NULL they keep ending the process (a one-shot command). Call it once, from
 * main() before starting threads. Returns 0, or VC_ERR_IO when sigaction()
 * failed.
 */
int vc_signal_install(vc_signal_stop_cb on_stop);

#endif
