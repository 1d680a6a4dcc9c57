#include "vc_signal.h"

#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "vc_error.h"
#include "vc_shutdown.h"

/* Set once by main(), read by the handler. */
static vc_signal_stop_cb stop_cb;
/* Whether a stop signal came: a signal handler may store into it, since it is lock-free. */
static atomic_int stopping;

_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "a signal handler stores into an atomic_int");

static void stop_handler(int signum)
{
    if (atomic_exchange(&stopping, 1))
        return;
    vc_shutdown_begin();
    stop_cb(signum);
}

int vc_signal_install(vc_signal_stop_cb on_stop)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = SIG_IGN;
    if (sigaction(SIGPIPE, &sa, NULL) != 0)
        return VC_ERR_IO;
    if (!on_stop)
        return 0;
    stop_cb = on_stop;
    sa.sa_handler = stop_handler;
    sa.sa_flags = SA_RESTART;
    /* Neither handler runs inside the other: the first stop signal is the one on_stop sees. */
    sigaddset(&sa.sa_mask, SIGTERM);
    sigaddset(&sa.sa_mask, SIGINT);
    if (sigaction(SIGTERM, &sa, NULL) != 0 || sigaction(SIGINT, &sa, NULL) != 0)
        return VC_ERR_IO;
    return 0;
}
