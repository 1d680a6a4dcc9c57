/*
 * The admin endpoint of the writer and the reconciler: /healthz (the process
 * is alive), /readyz (it has what it needs) and /metrics (Prometheus), served
 * over HTTP/1.1 from a thread of its own, so a daemon busy with a batch or a
 * pass still answers its probes.
 */
#ifndef VC_ADMIN_H
#define VC_ADMIN_H

#include <stddef.h>

/*
 * Says whether the daemon is ready. Called on the admin thread: it must only
 * read state the daemon publishes atomically. Returns 1 when ready; detail
 * (cap bytes) may say why not.
 */
typedef int (*vc_admin_ready_cb)(void *arg, char *detail, size_t cap);

typedef struct vc_admin vc_admin_t;

/*
 * Listens on addr ("host:port") and serves from a new thread. ready and arg
 * are borrowed until vc_admin_stop(). Returns 0 with *out set, or a negative
 * error with err set (nothing to stop then).
 */
int vc_admin_start(const char *addr, vc_admin_ready_cb ready, void *arg, vc_admin_t **out,
                   char *err, size_t errlen);

/*
 * Answers req when it asks for /healthz, /readyz (ready and arg as above; on
 * the caller's thread) or /metrics, and returns 1; returns 0, req untouched,
 * for any other path. For a server that serves more than these on the admin
 * address (the gateway's admin listener, gateway/gw_worker.h).
 */
struct vc_http_request;
int vc_admin_respond(vc_admin_ready_cb ready, void *arg, struct vc_http_request *req);

/* Stops serving, joins the thread and frees everything. NULL is fine. */
void vc_admin_stop(vc_admin_t *admin);

#endif
