/*
 * The load engine of vc-load: a single-threaded libuv client that keeps a set
 * of HTTP/1.1 keep-alive connections to the gateway, one request in flight on
 * each, and pushes reservation attempts through them either as fast as the
 * gateway answers (closed loop) or on a fixed schedule (open loop).
 *
 * An attempt is one orderId. It may be sent more than once: after a timeout,
 * a connection error or a 503 when retries are allowed, and, without counting
 * as a retry, when a reused keep-alive connection turns out to be closed by
 * the server before any byte of the answer came back. Every send of an
 * attempt carries the same orderId, so the gateway replays it rather than
 * reserving twice. Its final result is the last answer it got.
 */
#ifndef VL_LOAD_H
#define VL_LOAD_H

#include <stdint.h>
#include <stdio.h>

#include "vc_hist.h"
#include "vl_proto.h"

/* Final statuses that are not HTTP status codes. */
#define VL_STATUS_TIMEOUT (-1) /* no answer within the timeout: outcome unknown */
#define VL_STATUS_ERROR (-2)   /* connection failed mid-request: outcome unknown */

#define VL_ORDER_ID_MAX 128
#define VL_MAX_OUTCOMES 64 /* distinct (status, error) pairs tracked in the summary */

typedef struct {
    char host[256]; /* numeric IPv4 or IPv6 address, or "localhost" */
    int port;
    const char *code;         /* borrowed */
    const char *const *codes; /* attempt i reserves codes[i % ncodes] when ncodes > 0; borrowed */
    int64_t ncodes;
    const char *order_prefix; /* borrowed */
    const char *token;        /* bearer token sent with every request, or NULL; borrowed */
    int forwarded;            /* send X-Forwarded-For: each customer's own address */
    int64_t attempts;
    int64_t connections;
    int64_t customers;     /* 0: attempt i gets its own customer, i + 1 */
    int random_customers;  /* pick from 1..customers with a generator seeded by seed */
    int64_t customer_base; /* added to every customer id */
    int64_t amount;
    int64_t retries;
    int64_t rate;               /* attempts per second; 0 for closed loop */
    int64_t timeout_ms;         /* per request; 0 for none */
    int64_t duration_ms;        /* stop issuing attempts after this long; 0 for no limit */
    int64_t connect_timeout_ms; /* give up when no connection works for this long */
    uint64_t seed;
} vl_options_t;

/* One finished attempt, as handed to the result callback. */
typedef struct {
    int64_t index;
    const char *order_id; /* borrowed until the callback returns */
    int64_t customer_id;
    int status;        /* HTTP status, VL_STATUS_TIMEOUT or VL_STATUS_ERROR */
    const char *error; /* the body's "error", "" when none; borrowed */
    int replayed;
    uint64_t latency_us; /* from the scheduled (open loop) or first send to the last answer */
    int tries;           /* how many times it was sent */
    int64_t start_us;    /* wall clock, µs since the epoch, of the scheduled or first send */
    int64_t end_us;      /* wall clock of the final answer */
} vl_result_t;

typedef void (*vl_result_cb)(const vl_result_t *result, void *arg);

typedef struct {
    int status;
    char error[VL_ERROR_MAX];
    uint64_t count;
} vl_outcome_t;

typedef struct {
    uint64_t planned;       /* attempts asked for */
    uint64_t finished;      /* attempts with a final result */
    uint64_t requests;      /* sends, retries included */
    uint64_t retries;       /* sends beyond the first that counted against --retries */
    uint64_t stale_resends; /* resends after a closed keep-alive connection */
    uint64_t replayed;
    uint64_t connects;                      /* connections established */
    uint64_t connect_errors;                /* failed connects (refused, timed out) */
    uint64_t server_closes;                 /* connections the server closed */
    vl_outcome_t outcomes[VL_MAX_OUTCOMES]; /* by (status, error), in order of first sight */
    size_t noutcomes;
    uint64_t outcomes_dropped; /* results beyond VL_MAX_OUTCOMES distinct pairs */
    uint64_t elapsed_us;       /* from the start to the last result */
    int interrupted;           /* stopped early by SIGINT or SIGTERM */
    int gave_up;               /* stopped because no connection worked for connect_timeout */
    vc_hist_t latency_us;      /* final latency of every finished attempt */
} vl_stats_t;

/*
 * Runs the load to completion on a private libuv loop: until every attempt
 * has a result, the duration is over, a signal arrives or the gateway cannot
 * be reached for connect_timeout. Calls result_cb (may be NULL) once per
 * finished attempt, on this thread. stats is filled in (caller-owned).
 *
 * Returns 0 when the run happened (whatever the statuses), VC_ERR_UNAVAILABLE
 * when not a single connection could be made, VC_ERR_INVALID for a bad address
 * or option, VC_ERR_NOMEM; err says why.
 */
int vl_run(const vl_options_t *opt, vl_result_cb result_cb, void *arg, vl_stats_t *stats, char *err,
           size_t errlen);

/*
 * The customer id of attempt index: deterministic for given options, whatever
 * the order attempts finish in.
 */
int64_t vl_customer_of(const vl_options_t *opt, int64_t index);

/* The code attempt index reserves: the codes' (index % ncodes)th, else opt->code. */
const char *vl_code_of(const vl_options_t *opt, int64_t index);

#endif
