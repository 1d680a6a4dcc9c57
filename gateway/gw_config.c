#include "gw_config.h"
#include "vc_retention.h"

#include <stddef.h>

#define STR(flag, env, def, field, help)                                                           \
    {                                                                                              \
        flag, env, VC_CFG_STRING, def, offsetof(gw_config_t, field), 0, 0, help                    \
    }
#define INT(flag, env, def, field, lo, hi, help)                                                   \
    {                                                                                              \
        flag, env, VC_CFG_INT, def, offsetof(gw_config_t, field), lo, hi, help                     \
    }
#define MS(flag, env, def, field, lo, hi, help)                                                    \
    {                                                                                              \
        flag, env, VC_CFG_MS, def, offsetof(gw_config_t, field), lo, hi, help                      \
    }

const vc_cfg_param_t gw_config_params[] = {
    STR("http-addr", "VOUCHER_HTTP_ADDR", "127.0.0.1:15410", http_addr,
        "address the HTTP API listens on (host:port)"),
    {"admin-addr", "VOUCHER_GATEWAY_ADMIN_ADDR,VOUCHER_ADMIN_ADDR", VC_CFG_STRING_OFF,
     "127.0.0.1:15414", offsetof(gw_config_t, admin_addr), 0, 0,
     "address of the admin routes (POST, GET, PATCH /vouchers..., /campaigns...) and of "
     "/healthz, /readyz and /metrics (host:port), apart from the API's, which serves only the "
     "order service's routes and /healthz; empty = off (no admin route anywhere)"},
    STR("redis-url", "VOUCHER_REDIS_URL", "redis://127.0.0.1:15401/0", redis_url,
        "Redis holding the remaining uses and holds: redis://[user:password@]host:port/db, or "
        "redis+cluster://[user:password@]host:port,host:port,... (seed nodes) for a Redis Cluster"),
    STR("kafka-brokers", "VOUCHER_KAFKA_BROKERS", "127.0.0.1:15402", kafka_brokers,
        "Kafka bootstrap servers (comma-separated host:port)"),
    STR("kafka-topic", "VOUCHER_KAFKA_TOPIC", "voucher-events", kafka_topic,
        "topic the voucher events are published to"),
    STR("pg-dsn", "VOUCHER_GATEWAY_PG_DSN,VOUCHER_PG_DSN",
        "host=127.0.0.1 port=15400 dbname=voucher user=voucher_gateway", pg_dsn,
        "PostgreSQL connection string (libpq conninfo) for voucher rules, as the role "
        "voucher_gateway (deploy/sql/008_daemon_roles.sql)"),
    STR("log-level", "VOUCHER_LOG_LEVEL", "info", log_level, "debug, info, warn or error"),
    MS("hold-ttl", "VOUCHER_HOLD_TTL", "15m", hold_ttl_ms, 1000, 86400000LL,
       "how long a reservation holds a use before it may be released"),
    INT("threads", "VOUCHER_GATEWAY_THREADS", "0", threads, 0, 256,
        "worker threads, each with its own loop and listener; 0 = one per core"),
    MS("redis-timeout", "VOUCHER_REDIS_TIMEOUT", "500ms", redis_timeout_ms, 1, 60000,
       "deadline of each Redis command; a late command fails alone (503)"),
    MS("kafka-timeout", "VOUCHER_KAFKA_TIMEOUT", "5s", kafka_timeout_ms, 10, 300000,
       "how long the producer tries to deliver an event (delivery.timeout.ms)"),
    INT("redis-wait-replicas", "VOUCHER_REDIS_WAIT_REPLICAS", "0", redis_wait_replicas, 0, 5,
        "Redis replicas a use taken, a confirm or a cancel must reach (WAIT) before its event "
        "is published, and a PATCH lowering totalLimit before it commits; 0 = no WAIT. Too "
        "few in time: 503, outcome unknown, nothing published (proto/redis-keys.md, \"Redis "
        "Cluster\"). Give the reconciler the same value"),
    MS("redis-wait-timeout", "VOUCHER_REDIS_WAIT_TIMEOUT", "100ms", redis_wait_timeout_ms, 1,
       60000, "how long that WAIT waits for the replicas"),
    {"redis-fence", "VOUCHER_REDIS_FENCE", VC_CFG_BOOL, "false", offsetof(gw_config_t, redis_fence),
     0, 1,
     "refuse to write to a Redis whose run_id the reconciler has not verified since it started "
     "(the restart fence: needed when Redis may come back without its last writes, as under "
     "appendfsync everysec; proto/redis-keys.md); one node only, not a Redis Cluster"},
    MS("rules-ttl", "VOUCHER_RULES_TTL", "5s", rules_ttl_ms, 0, 3600000,
       "how long cached voucher rules are trusted before PostgreSQL is read again"),
    MS("rules-miss-ttl", "VOUCHER_RULES_MISS_TTL", "1s", rules_miss_ttl_ms, 0, 3600000,
       "how long an unknown voucher code is answered 404 from memory"),
    MS(VC_REDIS_RETENTION_FLAG, VC_REDIS_RETENTION_ENV, VC_REDIS_RETENTION_DEFAULT,
       redis_retention_ms, VC_REDIS_RETENTION_MIN_MS, VC_REDIS_RETENTION_MAX_MS,
       VC_REDIS_RETENTION_HELP),
    INT("rules-max-loads", "VOUCHER_RULES_MAX_LOADS", "2", rules_max_loads, 1, 64,
        "rule reads of one worker running in PostgreSQL at once; more wait in a bounded queue"),
    MS("soldout-recheck", "VOUCHER_SOLDOUT_RECHECK", "1s", soldout_recheck_ms, 0, 3600000,
       "how long a sold-out voucher is answered OUT_OF_STOCK without running the script"),
    INT("max-connections", "VOUCHER_MAX_CONNECTIONS", "1000", max_connections, 1, 1000000,
        "open client connections allowed, all workers together; past it a new connection "
        "closes the one idle longest (no request under way), and gets 503 and is closed when "
        "none is idle (the default fits a 256 MiB memory limit: deploy/README.md, "
        "\"Connections and memory\")"),
    INT("max-connections-per-ip", "VOUCHER_MAX_CONNECTIONS_PER_IP", "256", max_per_ip, 0, 1000000,
        "open client connections allowed from one address (an order service behind a NAT "
        "shares one: size it above the pools behind each address); more get 503 and are "
        "closed; 0 = no cap"),
    MS("idle-timeout", "VOUCHER_HTTP_IDLE_TIMEOUT", "30s", idle_timeout_ms, 100, 3600000,
       "idle keep-alive time, and the time a client has to send one request"),
    MS("write-timeout", "VOUCHER_HTTP_WRITE_TIMEOUT", "10s", write_timeout_ms, 100, 3600000,
       "the time a client has to take one answer; a connection that does not (a client that "
       "pipelines requests and never reads) is closed"),
    INT("pg-pool-size", "VOUCHER_PG_POOL_SIZE", "4", pg_pool_size, 1, 64,
        "PostgreSQL connections shared by the rule loads"),
    STR("admin-token", "VOUCHER_ADMIN_TOKEN", "", admin_token,
        "bearer tokens of POST /vouchers and GET /vouchers/{code}, comma-separated (rotation), "
        "each of at least 32 characters and not the template's CHANGE-ME (else the gateway "
        "exits 2); when empty (the default) the admin routes answer 401 to everyone"),
    STR("admin-tokens-file", "VOUCHER_ADMIN_TOKENS_FILE", "", admin_tokens_file,
        "a file of named admin tokens, lines \"NAME SHA256-HEX-OF-TOKEN\" ('#' comments): "
        "each admin's name goes into the admin audit; read again on SIGHUP (a token rotated "
        "without a restart); with VOUCHER_ADMIN_TOKEN too, both are accepted"),
    INT("admin-login-tries", "VOUCHER_ADMIN_LOGIN_TRIES", "10", admin_login_tries, 0, 100000,
        "failed admin logins (401) one client address may make per admin-login-window, "
        "refilled evenly; beyond them its admin requests get 429 with Retry-After, whatever "
        "their token; 0 turns the limit off"),
    MS("admin-login-window", "VOUCHER_ADMIN_LOGIN_WINDOW", "10m", admin_login_window_ms, 1000,
       86400000LL, "time in which an address's failed admin logins refill completely"),
    STR("api-token", "VOUCHER_API_TOKEN", "", api_token,
        "bearer tokens of the order service (reserve, confirm, release, quote), comma-separated "
        "(rotation), each of at least 32 characters and not the template's CHANGE-ME (else the "
        "gateway exits 2); when empty (the default) those routes need no token"),
    MS("shutdown-timeout", "VOUCHER_SHUTDOWN_TIMEOUT", "20s", shutdown_timeout_ms, 1000, 600000,
       "on SIGTERM: stop accepting, answer the requests in flight and flush the producer "
       "within this time"),
    STR("kafka", "VOUCHER_KAFKA_CONF", "", kafka_conf,
        "librdkafka settings passed through, \"key=value,key=value\"; the flag may be repeated "
        "(one key=value each, added after the variable's)"),
    INT("guard-customer-tries", "VOUCHER_GUARD_CUSTOMER_TRIES", "5", guard_customer_tries, 0,
        100000,
        "failed tries (unknown codes) one customer may make per guard-customer-window; a "
        "success spends none; 0 turns the customer bucket off (proto/openapi.yaml, guessing)"),
    MS("guard-customer-window", "VOUCHER_GUARD_CUSTOMER_WINDOW", "1h", guard_customer_window_ms,
       1000, 86400000LL, "time in which a customer's empty bucket refills completely"),
    INT("guard-ip-tries", "VOUCHER_GUARD_IP_TRIES", "100", guard_ip_tries, 0, 100000,
        "failed tries one client IP address (an IPv6 /64) may make per guard-ip-window; 0 "
        "turns the IP bucket off"),
    MS("guard-ip-window", "VOUCHER_GUARD_IP_WINDOW", "1h", guard_ip_window_ms, 1000, 86400000LL,
       "time in which a client IP's empty bucket refills completely"),
    STR("trusted-proxies", "VOUCHER_TRUSTED_PROXIES", "", trusted_proxies,
        "comma-separated CIDRs of proxies whose X-Forwarded-For names the client; the client "
        "is then the right-most hop that is not one of them (empty: the socket's peer)"),
    VC_CFG_END,
};
