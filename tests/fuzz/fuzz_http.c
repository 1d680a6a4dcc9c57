/*
 * libFuzzer harness of the gateway's request path. The input is what one
 * client sends: it goes over loopback TCP to a gw_http server
 * (common/vc_http.c: the http-parser glue, its limits, pipelining, the
 * buffers given back to its cache between requests), whose handler routes each request
 * (gw_router.c), checks its token and parses its body as the route's
 * handler does. Every other answer waits a loop turn, so that more of the
 * stream, or its end, arrives while a request is in flight. The first byte
 * chooses the size of the pieces the rest is sent in. The server and the
 * loop must end clean: every handle closed, nothing leaked (LeakSanitizer).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "gw_http.h"
#include "gw_router.h"
#include "vc_log.h"
#include "vc_voucher.h"
#include "vc_voucher_create.h"

static int listen_fd = -1;
static struct sockaddr_in listen_addr;
static int answers_waiting;

/* An answer given on the next loop turn. */
typedef struct {
    uv_timer_t timer;
    gw_request_t *req;
} later_t;

static void listener_setup(void)
{
    socklen_t len = sizeof(listen_addr);

    listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&listen_addr, 0, sizeof(listen_addr));
    listen_addr.sin_family = AF_INET;
    listen_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&listen_addr, len) != 0 ||
        listen(listen_fd, 16) != 0 ||
        getsockname(listen_fd, (struct sockaddr *)&listen_addr, &len) != 0) {
        perror("fuzz_http: listener");
        abort();
    }
}

/* A connected loopback pair: *client (non-blocking) is ours, *server goes to gw_http_adopt(). */
static void tcp_pair(int *client, int *server)
{
    struct pollfd pfd;

    *client = socket(AF_INET, SOCK_STREAM, 0);
    /*
     * libFuzzer's alarm (-timeout) may interrupt connect(), and the
     * connection then goes on by itself: wait until it is made.
     */
    if (*client < 0 ||
        (connect(*client, (struct sockaddr *)&listen_addr, sizeof(listen_addr)) != 0 &&
         errno != EINTR)) {
        perror("fuzz_http: connect");
        abort();
    }
    pfd.fd = *client;
    pfd.events = POLLOUT;
    while (poll(&pfd, 1, -1) < 0 && errno == EINTR)
        ;
    while ((*server = accept(listen_fd, NULL, NULL)) < 0 && errno == EINTR)
        ;
    if (*server < 0) {
        perror("fuzz_http: accept");
        abort();
    }
    fcntl(*client, F_SETFL, fcntl(*client, F_GETFL) | O_NONBLOCK);
}

/* What the gateway's handlers do with a request before any I/O: route, token, body. */
static void answer(gw_request_t *req)
{
    gw_route_t route;
    char err[256] = "", body[1024];
    size_t len = 0;
    int rc = 0;

    gw_route(req->method, req->path, req->path_len, &route);
    if (gw_route_auth(route.kind) != 0 && !gw_bearer_authorized(req->authorization, "tok-a, tok-b"))
        rc = GW_E_UNAUTHORIZED;
    switch (route.kind) {
    case GW_ROUTE_RESERVE: {
        gw_reserve_req_t r;
        rc = gw_reserve_req_parse(req->body, req->body_len, &r, err, sizeof(err));
        if (rc == 0)
            len = gw_body_reservation(body, sizeof(body), r.order_id, route.code, r.order_amount,
                                      r.customer_id, 0);
        break;
    }
    case GW_ROUTE_QUOTE: {
        gw_quote_req_t q;
        rc = gw_quote_req_parse(req->body, req->body_len, &q, err, sizeof(err));
        break;
    }
    case GW_ROUTE_CREATE: {
        vc_voucher_t v;
        rc = vc_voucher_parse(req->body, req->body_len, &v, err, sizeof(err));
        if (rc == 0)
            len = gw_body_voucher(body, sizeof(body), &v, 1, 0, 0, 0, 0);
        break;
    }
    case GW_ROUTE_CONFIRM:
    case GW_ROUTE_CANCEL:
        len = gw_body_status(body, sizeof(body), route.order_id, route.code, "CONFIRMED", 0);
        break;
    default:
        break;
    }
    if (rc != 0 || len == 0) {
        const char *error, *reason;
        int status = gw_status_for(rc, &error, &reason);
        len = gw_body_error(body, sizeof(body), error, err[0] ? err : "fuzz", reason);
        gw_http_respond(req, rc ? status : 404, NULL, body, len);
        return;
    }
    gw_http_respond(req, 200, NULL, body, len);
}

static void later_close_cb(uv_handle_t *h)
{
    free(h->data);
    answers_waiting--;
}

static void later_cb(uv_timer_t *t)
{
    later_t *l = t->data;
    answer(l->req);
    uv_close((uv_handle_t *)&l->timer, later_close_cb);
}

static void handle(void *ctx, gw_request_t *req)
{
    uv_loop_t *loop = ctx;
    later_t *l;

    if (req->id % 2 == 1 || !(l = malloc(sizeof(*l)))) {
        answer(req);
        return;
    }
    l->req = req;
    uv_timer_init(loop, &l->timer);
    l->timer.data = l;
    answers_waiting++;
    uv_timer_start(&l->timer, later_cb, 0, 0);
}

static void done_cb(gw_http_server_t *s)
{
    (void)s;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    vc_log_init("fuzz", "error");
    listener_setup();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static gw_http_server_t server;
    uv_loop_t loop;
    atomic_long connections = 0;
    gw_http_limits_t limits = {
        .idle_timeout_ms = 60000,
        .write_timeout_ms = 60000,
        .connections = &connections,
        .max_connections = 16,
    };
    int client, sock, shut = 0;
    size_t piece, left;
    const uint8_t *p;
    char sink[16384];

    if (size < 1)
        return 0;
    piece = 1 + (size_t)data[0] * 17;
    p = data + 1;
    left = size - 1;
    uv_loop_init(&loop);
    gw_http_init(&server, &loop, &limits, handle, &loop);
    tcp_pair(&client, &sock);
    if (gw_http_adopt(&server, sock) != 0)
        abort();
    for (long turn = 0; turn < 200000; turn++) {
        if (left) {
            ssize_t n = send(client, p, left < piece ? left : piece, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n > 0) {
                p += n;
                left -= (size_t)n;
            } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
                left = 0; /* the server closed its end */
            }
        } else if (!shut) {
            shutdown(client, SHUT_WR);
            shut = 1;
        }
        uv_run(&loop, UV_RUN_NOWAIT);
        while (recv(client, sink, sizeof(sink), MSG_DONTWAIT) > 0)
            ;
        if ((shut || left == 0) && !server.conns && server.requests == 0 && answers_waiting == 0)
            break;
    }
    close(client);
    gw_http_shutdown(&server, done_cb);
    while (uv_run(&loop, UV_RUN_DEFAULT) != 0)
        ;
    if (answers_waiting != 0 || server.requests != 0 || atomic_load(&connections) != 0 ||
        uv_loop_close(&loop) != 0) {
        fprintf(stderr, "fuzz_http: the server did not end clean\n");
        abort();
    }
    return 0;
}
