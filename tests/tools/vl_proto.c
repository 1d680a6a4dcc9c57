#include "vl_proto.h"
#include "vc_error.h"
#include "vc_json.h"

#include <stdio.h>
#include <string.h>
#include <yajl/yajl_tree.h>

/* Percent-encodes everything but RFC 3986 unreserved characters. */
static size_t path_escape(char *buf, size_t cap, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;

    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        int plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.' || c == '~';
        if (n + (plain ? 1 : 3) >= cap)
            return 0;
        if (plain) {
            buf[n++] = (char)c;
        } else {
            buf[n++] = '%';
            buf[n++] = hex[c >> 4];
            buf[n++] = hex[c & 15];
        }
    }
    buf[n] = '\0';
    return n;
}

size_t vl_request_format(char *buf, size_t cap, const char *host, const char *token,
                         const char *code, int64_t customer_id, const char *order_id,
                         int64_t order_amount, int forwarded)
{
    char path_code[256], body[768], xff[64] = "";
    size_t body_len;
    int n;
    int with_token = token && *token;
    vc_jgen_t g;

    if (!path_escape(path_code, sizeof(path_code), code) || vc_jgen_init(&g) != 0)
        return 0;
    vc_jgen_map_open(&g);
    vc_jgen_kv_int(&g, "customerId", customer_id);
    vc_jgen_kv_str(&g, "orderId", order_id);
    vc_jgen_kv_int(&g, "orderAmount", order_amount);
    vc_jgen_map_close(&g);
    /* An order id too long for the body is refused, not cut. */
    if (vc_jgen_finish(&g, body, sizeof(body), &body_len) != 0)
        return 0;
    /* The shopper's address, as an order service in front of the gateway forwards it. */
    if (forwarded)
        snprintf(xff, sizeof(xff), "X-Forwarded-For: 10.%d.%d.%d\r\n",
                 (int)((uint64_t)customer_id >> 16 & 255), (int)((uint64_t)customer_id >> 8 & 255),
                 (int)((uint64_t)customer_id & 255));
    n = snprintf(buf, cap,
                 "POST /vouchers/%s/reservations HTTP/1.1\r\n"
                 "Host: %s\r\n"
                 "User-Agent: vc-load\r\n"
                 "%s%s%s%s"
                 "Content-Type: application/json\r\n"
                 "Content-Length: %zu\r\n"
                 "\r\n"
                 "%s",
                 path_code, host, with_token ? "Authorization: Bearer " : "",
                 with_token ? token : "", with_token ? "\r\n" : "", xff, body_len, body);
    if (n < 0 || (size_t)n >= cap)
        return 0;
    return (size_t)n;
}

int vl_answer_parse(const char *body, size_t len, vl_answer_t *out)
{
    const char *replayed_path[] = {"replayed", NULL};
    vc_jdoc_t doc;
    const char *error;
    yajl_val replayed;
    char err[128];

    out->error[0] = '\0';
    out->replayed = 0;
    if (vc_jdoc_parse(&doc, body, len, err, sizeof(err)) != 0)
        return VC_ERR_INVALID;
    if (vc_jdoc_str(&doc, "error", &error, err, sizeof(err)) == 0)
        snprintf(out->error, sizeof(out->error), "%s", error);
    /*
     * vc_json.h has no boolean reader yet; this is the one place the tool
     * looks at yajl directly. Move it to vc_jdoc_bool() when common gets one.
     */
    replayed = yajl_tree_get((yajl_val)doc.root, replayed_path, yajl_t_any);
    out->replayed = replayed && YAJL_IS_TRUE(replayed);
    vc_jdoc_free(&doc);
    return 0;
}

int64_t vl_retry_after_ms(const char *value, size_t len)
{
    int64_t seconds = 0;
    size_t i = 0;

    while (i < len && (value[i] == ' ' || value[i] == '\t'))
        i++;
    if (i == len)
        return -1;
    for (; i < len && value[i] >= '0' && value[i] <= '9'; i++) {
        if (seconds > 86400)
            return -1;
        seconds = seconds * 10 + (value[i] - '0');
    }
    while (i < len && (value[i] == ' ' || value[i] == '\t'))
        i++;
    return i == len ? seconds * 1000 : -1;
}
