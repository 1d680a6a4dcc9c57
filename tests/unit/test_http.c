/*
 * vc_http: the server every daemon uses, driven over a socketpair on one
 * loop. A keep-alive request costs no malloc once the server's cache is
 * warm; HEAD answers carry no body; a connection over the limit is refused,
 * or closes the idle (with VC_HTTP_EVICT_QUIET, else the quietest) other
 * one; a request that does not arrive whole within the read timeout closes
 * its connection; lenient framing (RFC 9112) gets 400.
 *
 * malloc, calloc and realloc are wrapped at link time (meson.build:
 * -Wl,--wrap=...), so every call from our own code is counted.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "ck_run.h"
#include "vc_http.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);

/* Counted only while counting is set: Check's own asserts allocate. */
static long allocations;
static int counting;

void *__wrap_malloc(size_t n)
{
    allocations += counting;
    return __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size)
{
    allocations += counting;
    return __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n)
{
    allocations += counting;
    return __real_realloc(p, n);
}

static const char answer[] = "{\"status\":\"ok\"}";

/* Answers every request at once with a fixed JSON body. */
static void handle_cb(void *ctx, vc_http_request_t *req)
{
    (void)ctx;
    vc_http_respond(req, 200, NULL, answer, sizeof(answer) - 1);
}

typedef struct {
    uv_loop_t loop;
    vc_http_server_t server;
    atomic_long connections;
    vc_http_limits_t limits;
} fixture_t;

static void fixture_init(fixture_t *f, long max_connections, vc_http_evict_t evict,
                         int64_t read_timeout_ms, int64_t idle_timeout_ms)
{
    memset(f, 0, sizeof(*f));
    ck_assert_int_eq(uv_loop_init(&f->loop), 0);
    atomic_init(&f->connections, 0);
    f->limits = (vc_http_limits_t){.idle_timeout_ms = idle_timeout_ms,
                                   .read_timeout_ms = read_timeout_ms,
                                   .write_timeout_ms = 10000,
                                   .connections = &f->connections,
                                   .max_connections = max_connections,
                                   .evict = evict};
    vc_http_init(&f->server, &f->loop, &f->limits, handle_cb, NULL);
}

static void done_cb(vc_http_server_t *s)
{
    (void)s;
}

static void fixture_end(fixture_t *f)
{
    vc_http_shutdown(&f->server, done_cb);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(uv_loop_close(&f->loop), 0);
}

/* A client socket (non-blocking) whose other end the server adopted. */
static int connect_client(fixture_t *f)
{
    int sv[2];

    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    ck_assert_int_eq(fcntl(sv[0], F_SETFL, O_NONBLOCK), 0);
    ck_assert_int_eq(vc_http_adopt(&f->server, sv[1]), 0);
    return sv[0];
}

/*
 * Runs the loop until want bytes came on fd, or, with want 0, until the
 * server closed it (what came before the close, at most 255 bytes, is left
 * in buf NUL-terminated), for at most 5 s. Returns the bytes read, or -1
 * when the server closed before want bytes came.
 */
static ssize_t read_answer(fixture_t *f, int fd, char *buf, size_t want)
{
    size_t got = 0, cap = want ? want : 255;
    uint64_t deadline = uv_hrtime() + 5000000000ULL;

    while (uv_hrtime() < deadline) {
        ssize_t n = read(fd, buf + got, cap - got);
        if (n == 0 || (n < 0 && errno != EAGAIN) || (!want && got == cap)) {
            if (want)
                return -1;
            buf[got] = '\0';
            return (ssize_t)got;
        }
        if (n > 0 && (got += (size_t)n) == want)
            return (ssize_t)got;
        uv_run(&f->loop, UV_RUN_NOWAIT);
        if (n < 0)
            usleep(1000);
    }
    ck_abort_msg("no answer within 5 s");
    return -1;
}

static void send_all(int fd, const char *s)
{
    ck_assert_int_eq(write(fd, s, strlen(s)), (ssize_t)strlen(s));
}

static const char get_req[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
static const char post_req[] = "POST /things HTTP/1.1\r\nHost: x\r\nContent-Length: 13\r\n\r\n"
                               "{\"a\":1,\"b\":2}";

/* The head of handle_cb's answer on a keep-alive connection, into buf (256 bytes). */
static size_t answer_head(char *buf)
{
    return vc_http_format_head(buf, 256, 200, sizeof(answer) - 1, 1,
                               "Content-Type: application/json\r\n", NULL);
}

START_TEST(keep_alive_request_costs_no_malloc)
{
    fixture_t f;
    char want[256], buf[256];
    size_t len = answer_head(want);
    int fd;

    memcpy(want + len, answer, sizeof(answer) - 1);
    len += sizeof(answer) - 1;
    fixture_init(&f, 10, VC_HTTP_EVICT_NONE, 0, 10000);
    fd = connect_client(&f);
    /* The first requests fill the server's cache. */
    for (int i = 0; i < 4; i++) {
        send_all(fd, i % 2 ? get_req : post_req);
        ck_assert_int_eq(read_answer(&f, fd, buf, len), (ssize_t)len);
        ck_assert_mem_eq(buf, want, len);
    }
    allocations = 0;
    for (int i = 0; i < 200; i++) {
        ssize_t got;
        counting = 1;
        if (write(fd, i % 2 ? get_req : post_req, i % 2 ? strlen(get_req) : strlen(post_req)) < 0)
            break;
        got = read_answer(&f, fd, buf, len);
        counting = 0;
        ck_assert_int_eq(got, (ssize_t)len);
    }
    counting = 0;
    ck_assert_msg(allocations == 0, "%ld allocations for 200 requests", allocations);
    close(fd);
    fixture_end(&f);
}
END_TEST

START_TEST(head_gets_no_body)
{
    fixture_t f;
    char head[256], buf[512];
    size_t head_len = answer_head(head);
    int fd;

    fixture_init(&f, 10, VC_HTTP_EVICT_NONE, 0, 10000);
    fd = connect_client(&f);
    /* Pipelined: the GET's answer must follow the HEAD's head at once. */
    send_all(fd, "HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
    send_all(fd, get_req);
    ck_assert_int_eq(read_answer(&f, fd, buf, 2 * head_len + sizeof(answer) - 1),
                     (ssize_t)(2 * head_len + sizeof(answer) - 1));
    ck_assert_mem_eq(buf, head, head_len);
    ck_assert_mem_eq(buf + head_len, head, head_len);
    ck_assert_mem_eq(buf + 2 * head_len, answer, sizeof(answer) - 1);
    close(fd);
    fixture_end(&f);
}
END_TEST

/*
 * One connection over the limit. Without evict, the newcomer gets 503 and
 * the first one is served. With evict, an idle first one makes room: it is
 * closed (no answer), the newcomer is served. A first one in the middle of
 * a request is not idle: VC_HTTP_EVICT_IDLE (the gateway's API) refuses the
 * newcomer instead, VC_HTTP_EVICT_QUIET (the admin endpoints) closes it all
 * the same.
 */
START_TEST(over_the_limit)
{
    static const struct {
        vc_http_evict_t evict;
        int first_busy;           /* the first one has sent half a request */
        int first_closed;         /* which one is refused: the first, or the newcomer */
        const char *refused_with; /* what the refused one reads before the close */
    } cases[] = {
        {VC_HTTP_EVICT_IDLE, 0, 1, ""},
        {VC_HTTP_EVICT_NONE, 0, 0, "HTTP/1.1 503 "},
        {VC_HTTP_EVICT_IDLE, 1, 0, "HTTP/1.1 503 "},
        {VC_HTTP_EVICT_QUIET, 1, 1, ""},
    };
    fixture_t f;
    char buf[256] = "";
    int fd[2], refused, served;

    fixture_init(&f, 1, cases[_i].evict, 0, 10000);
    fd[0] = connect_client(&f);
    if (cases[_i].first_busy)
        send_all(fd[0], "GET /healthz HTTP/1.1\r\n");
    for (int i = 0; i < 10; i++)
        uv_run(&f.loop, UV_RUN_NOWAIT);
    fd[1] = connect_client(&f);
    refused = cases[_i].first_closed ? fd[0] : fd[1];
    served = cases[_i].first_closed ? fd[1] : fd[0];
    read_answer(&f, refused, buf, 0);
    ck_assert_mem_eq(buf, cases[_i].refused_with, strlen(cases[_i].refused_with));
    ck_assert(cases[_i].first_closed ? buf[0] == '\0' : strlen(buf) > 13);
    send_all(served, served == fd[0] && cases[_i].first_busy ? "Host: x\r\n\r\n" : get_req);
    ck_assert_int_gt(read_answer(&f, served, buf, 20), 0);
    ck_assert_mem_eq(buf, "HTTP/1.1 200 OK\r\n", 17);
    close(fd[0]);
    close(fd[1]);
    fixture_end(&f);
}
END_TEST

START_TEST(read_timeout_closes_a_request_that_never_ends)
{
    fixture_t f;
    char buf[256];
    int fd;
    uint64_t start;

    fixture_init(&f, 10, VC_HTTP_EVICT_NONE, 100, 10000);
    fd = connect_client(&f);
    send_all(fd, "GET /healthz HTTP/1.1\r\nHo");
    start = uv_hrtime();
    ck_assert_int_eq(read_answer(&f, fd, buf, 0), 0);
    /* Closed by the read timeout (100 ms), long before the idle timeout (10 s). */
    ck_assert_uint_lt(uv_hrtime() - start, 2000000000ULL);
    close(fd);
    fixture_end(&f);
}
END_TEST

/*
 * The idle timeout counts from the last answer: requests a third of it apart
 * keep the connection open well past it (each moves the deadline later; the
 * timer, armed for the first, fires and is armed again for the rest), and the
 * connection is closed once they stop, about the timeout after the last.
 */
START_TEST(idle_timeout_counts_from_the_last_answer)
{
    fixture_t f;
    char buf[256];
    size_t len = answer_head(buf) + sizeof(answer) - 1;
    uint64_t start, last = 0;
    int fd;

    fixture_init(&f, 10, VC_HTTP_EVICT_NONE, 0, 300);
    fd = connect_client(&f);
    start = uv_hrtime();
    for (int i = 0; i < 10; i++) {
        uint64_t until = uv_hrtime() + 100000000ULL;
        send_all(fd, get_req);
        ck_assert_int_eq(read_answer(&f, fd, buf, len), (ssize_t)len);
        last = uv_hrtime();
        while (uv_hrtime() < until) {
            uv_run(&f.loop, UV_RUN_NOWAIT);
            usleep(1000);
        }
    }
    /* Open 1 s after the first request, three timeouts: answered all along. */
    ck_assert_uint_gt(last - start, 900000000ULL);
    ck_assert_int_eq(read_answer(&f, fd, buf, 0), 0);
    /* Closed by the idle timeout after the last answer, not at once. */
    ck_assert_uint_ge(uv_hrtime() - last, 250000000ULL);
    close(fd);
    fixture_end(&f);
}
END_TEST

/*
 * RFC 9112 framing that Debian's http-parser lets through gets 400 and a
 * close (a proxy reading it otherwise would frame the next request
 * differently: request smuggling); framing that is merely unusual but valid
 * is served.
 */
START_TEST(lenient_framing_is_refused)
{
    static const struct {
        const char *request;
        const char *status; /* the answer's status line */
    } cases[] = {
        /* Whitespace before the colon: http-parser read this as chunked. */
        {"POST /things HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\n\r\n"
         "3\r\nabc\r\n0\r\n\r\n",
         "HTTP/1.1 400 "},
        {"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Any\t: y\r\n\r\n", "HTTP/1.1 400 "},
        {"GET /healthz HTTP/1.1\r\nHost : x\r\n\r\n", "HTTP/1.1 400 "},
        /* obs-fold: a framing header's value continued on the next line. */
        {"POST /things HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity,\r\n chunked\r\n\r\n"
         "3\r\nabc\r\n0\r\n\r\n",
         "HTTP/1.1 400 "},
        {"POST /things HTTP/1.1\r\nHost: x\r\nContent-Length:\r\n\t3\r\n\r\nabc", "HTTP/1.1 400 "},
        {"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Any: a\r\n b\r\n\r\n", "HTTP/1.1 400 "},
        /* Whitespace before the first header line. */
        {"GET /healthz HTTP/1.1\r\n Host: x\r\n\r\n", "HTTP/1.1 400 "},
        /* Bare LF: in the head, and in a chunked body's last line and trailer. */
        {"GET /healthz HTTP/1.1\nHost: x\n\n", "HTTP/1.1 400 "},
        {"GET /healthz HTTP/1.1\r\nHost: x\n\r\n", "HTTP/1.1 400 "},
        {"POST /things HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
         "3\r\nabc\r\n0\r\n\n",
         "HTTP/1.1 400 "},
        {"POST /things HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
         "3\r\nabc\r\n0\r\nX-Trailer: a\n\r\n",
         "HTTP/1.1 400 "},
        /* Valid: chunked with an extension, a trailer, tabs and spaces inside values. */
        {"POST /things HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
         "3;ext=1\r\nabc\r\n0\r\nX-Trailer: a\r\n\r\n",
         "HTTP/1.1 200 "},
        {"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Any:\t a  b\t\r\n\r\n", "HTTP/1.1 200 "},
        /* Valid: an empty line before the request line (RFC 9112 2.2). */
        {"\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 200 "},
    };
    fixture_t f;
    char buf[256];
    int fd;

    fixture_init(&f, 10, VC_HTTP_EVICT_NONE, 0, 10000);
    fd = connect_client(&f);
    send_all(fd, cases[_i].request);
    if (strcmp(cases[_i].status, "HTTP/1.1 200 ") == 0) {
        ck_assert_int_gt(read_answer(&f, fd, buf, 13), 0);
    } else {
        /* Answered, then closed: read_answer() with 0 reads until the close. */
        read_answer(&f, fd, buf, 0);
    }
    ck_assert_msg(strncmp(buf, cases[_i].status, 13) == 0, "case %d: %.40s", _i, buf);
    close(fd);
    fixture_end(&f);
}
END_TEST

/* How many cases lenient_framing_is_refused has. */
#define FRAMING_CASES 14

int main(void)
{
    Suite *s = suite_create("http");
    TCase *tc = tcase_create("server");

    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, keep_alive_request_costs_no_malloc);
    tcase_add_test(tc, head_gets_no_body);
    tcase_add_loop_test(tc, over_the_limit, 0, 4);
    tcase_add_test(tc, read_timeout_closes_a_request_that_never_ends);
    tcase_add_test(tc, idle_timeout_counts_from_the_last_answer);
    tcase_add_loop_test(tc, lenient_framing_is_refused, 0, FRAMING_CASES);
    suite_add_tcase(s, tc);
    return ck_run_suite(s);
}
