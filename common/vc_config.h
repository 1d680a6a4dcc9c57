/*
 * Table-driven configuration: every setting of a daemon is one row naming its
 * command-line flag, environment variable, type, default and help. Values come
 * from the default, then the environment, then the command line; --help is
 * generated from the same table, so the three never disagree.
 */
#ifndef VC_CONFIG_H
#define VC_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum {
    VC_CFG_STRING, /* const char * (borrowed from argv, environ or the table) */
    VC_CFG_STRING_OFF, /* the same, where an empty value means "off" (the help says so) */
    VC_CFG_INT,    /* int64_t, within [min, max] */
    VC_CFG_BOOL,   /* int: 0 or 1; a flag without a value means 1 */
    VC_CFG_MS,     /* int64_t milliseconds; text takes a unit: 250ms, 5s, 15m, 1h */
} vc_cfg_type_t;

typedef struct {
    const char *flag;    /* "http-addr", used as --http-addr */
    const char *env;     /* "VOUCHER_HTTP_ADDR", or NULL for a flag-only setting; "A,B"
                            reads B when A is unset (a daemon's own, then a shared one) */
    vc_cfg_type_t type;
    const char *def;     /* the default, as it would be written; NULL means unset */
    size_t offset;       /* offsetof() into the daemon's config struct */
    int64_t min, max;    /* bounds for INT and MS */
    const char *help;
} vc_cfg_param_t;

#define VC_CFG_END {NULL, NULL, VC_CFG_STRING, NULL, 0, 0, 0, NULL}

/* What vc_config_load() tells the caller to do. */
enum {
    VC_CFG_RUN = 0,  /* start the daemon */
    VC_CFG_EXIT = 1, /* --help or --version was printed: exit 0 */
};

/*
 * Fills cfg from params (terminated by VC_CFG_END): defaults, then environment,
 * then argv. An empty value for a setting whose default is not empty is an
 * error, from the environment as from the command line: an empty
 * VOUCHER_KAFKA_BROKERS silently meaning the default broker could join another
 * stack. Stops at the first argument that is not an option (or after
 * "--") and stores its index in *first_arg, so subcommands can follow.
 *
 * Returns VC_CFG_RUN, VC_CFG_EXIT, or VC_ERR_INVALID with err naming the
 * setting and what is wrong with its value.
 */
int vc_config_load(const vc_cfg_param_t *params, void *cfg, const char *prog, const char *summary,
                   int argc, char **argv, int *first_arg, char *err, size_t errlen);

/* Prints the generated help for params to out. */
void vc_config_usage(const vc_cfg_param_t *params, const char *prog, const char *summary,
                     FILE *out);

/*
 * Parses "host:port" into host (NUL-terminated, at most hostcap-1 bytes) and
 * port. Returns 0 or VC_ERR_INVALID.
 */
int vc_parse_host_port(const char *s, char *host, size_t hostcap, int *port);

/* A Redis address with its credentials, as VOUCHER_REDIS_URL gives them. */
typedef struct {
    char host[256];
    int port; /* 6379 when the URL names none */
    int db;   /* 0..15 */
    char user[128];     /* ACL user; "" sends AUTH with the password alone */
    char password[256]; /* "" sends no AUTH; never log it */
    int cluster;        /* redis+cluster://: host:port is the first seed of a Redis Cluster */
} vc_redis_url_t;

/*
 * Parses "redis://[[user]:password@]host[:port][/db]" into out: host and
 * port may be left out (127.0.0.1, 6379); user and password are
 * percent-decoded, so a password holding '@', ':' or '/' is written %40,
 * %3A, %2F. "user@host" without a password is refused, as is rediss:// (no
 * TLS here). Returns 0, or VC_ERR_INVALID with err saying what is wrong and
 * showing the URL only as vc_redis_url_redact() writes it.
 * "redis+cluster://[user:password@]host:port[,host:port...]" sets cluster
 * and takes the first seed as host:port (vc_redis_cluster.h reads them all).
 */
int vc_parse_redis_url(const char *url, vc_redis_url_t *out, char *err, size_t errlen);

/*
 * Writes url into buf (cap bytes, always NUL-terminated) with the password,
 * or the whole user part when it is not user:password, replaced by "***":
 * what logs and error messages show of a Redis URL. Works on any text, also
 * one vc_parse_redis_url() refuses. Returns buf.
 */
const char *vc_redis_url_redact(const char *url, char *buf, size_t cap);

#endif
