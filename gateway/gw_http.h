/*
 * The gateway's names for the common HTTP server (common/vc_http.h), which
 * holds the server itself: its limits, buffers and ownership rules are
 * documented there. The gateway's handlers were written against these
 * names; they are the same types and functions, not wrappers.
 */
#ifndef GW_HTTP_H
#define GW_HTTP_H

#include "gw_router.h" /* the gateway's handlers route with it */
#include "vc_http.h"

typedef vc_http_server_t gw_http_server_t;
typedef vc_http_ip_table_t gw_http_ip_table_t;
typedef vc_http_request_t gw_request_t;
typedef vc_http_handler_cb gw_http_handler_cb;
typedef vc_http_observe_cb gw_http_observe_cb;
typedef vc_http_limits_t gw_http_limits_t;

#define gw_http_ip_table_new vc_http_ip_table_new
#define gw_http_ip_table_free vc_http_ip_table_free
#define gw_http_check_free vc_http_check_free
#define gw_http_init vc_http_init
#define gw_http_listen vc_http_listen
#define gw_http_adopt vc_http_adopt
#define gw_http_format_head vc_http_format_head
#define gw_http_respond vc_http_respond
#define gw_http_stream_begin vc_http_stream_begin
#define gw_http_stream_chunk vc_http_stream_chunk
#define gw_http_stream_end vc_http_stream_end
#define gw_request_alloc vc_http_request_alloc
#define gw_http_shutdown vc_http_shutdown

#endif
