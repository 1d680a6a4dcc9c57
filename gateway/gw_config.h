/*
 * The gateway's settings: one struct and the table that fills it (defaults,
 * then VOUCHER_* environment variables, then --flags). main.c loads it; the
 * workers only read it.
 */
#ifndef GW_CONFIG_H
#define GW_CONFIG_H

#include <stdint.h>

#include "vc_config.h"

typedef struct {
    const char *http_addr;       /* host:port every worker listens on (SO_REUSEPORT) */
    const char *admin_addr;      /* host:port of the admin routes and the probes; "" = off */
    const char *redis_url;       /* redis://host:port/db */
    const char *kafka_brokers;   /* bootstrap.servers */
    const char *kafka_topic;     /* where events go, keyed by voucher code */
    const char *pg_dsn;          /* libpq conninfo for reading voucher rules */
    const char *log_level;       /* debug, info, warn, error */
    int64_t hold_ttl_ms;         /* how long a reservation holds a use */
    int64_t threads;             /* worker threads; 0 = one per core */
    int64_t redis_timeout_ms;    /* deadline of every Redis command */
    int64_t redis_wait_replicas;   /* replicas a use must reach before its event (WAIT); 0 none */
    int64_t redis_wait_timeout_ms; /* how long that WAIT waits */
    int redis_fence;               /* refuse writes until the reconciler verified Redis's run_id */
    int64_t kafka_timeout_ms;    /* delivery.timeout.ms of the producer */
    int64_t rules_ttl_ms;        /* how long cached voucher rules are trusted */
    int64_t rules_miss_ttl_ms;   /* how long an unknown code is remembered as unknown */
    int64_t redis_retention_ms;  /* voucher keys and claims expire this long after endsAt */
    int64_t rules_max_loads;     /* rule reads of one worker running at once */
    int64_t soldout_recheck_ms;  /* how long a sold-out voucher is answered from memory */
    int64_t max_connections;     /* open client connections, all workers together */
    int64_t max_per_ip;          /* open client connections from one address; 0 = no cap */
    int64_t idle_timeout_ms;     /* keep-alive idle time, and time to send one request */
    int64_t write_timeout_ms;    /* time a client has to take one answer */
    int64_t pg_pool_size;        /* PostgreSQL connections for rule loads */
    const char *admin_token;     /* bearer tokens of the admin routes; "" refuses them all */
    const char *admin_tokens_file; /* named admin tokens (gw_admins.h); "" none */
    const char *api_token;       /* bearer tokens of the order service's routes; "" = open */
    int64_t shutdown_timeout_ms; /* SIGTERM to exit, in-flight requests and flush included */
    const char *kafka_conf;      /* "key=value,key=value" passed to librdkafka */
    /* Guessing limits (gw_guard.h): failed tries a customer and a client IP may make. */
    int64_t guard_customer_tries;     /* per guard_customer_window_ms; 0 = off */
    int64_t guard_customer_window_ms;
    int64_t guard_ip_tries;           /* per guard_ip_window_ms; 0 = off */
    int64_t guard_ip_window_ms;
    int64_t admin_login_tries; /* failed admin logins per address per window; 0 = off */
    int64_t admin_login_window_ms;
    const char *trusted_proxies;      /* CIDRs whose X-Forwarded-For is believed */
} gw_config_t;

/* The settings table, terminated by VC_CFG_END. */
extern const vc_cfg_param_t gw_config_params[];

#endif
