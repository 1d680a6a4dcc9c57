/*
 * voucher-writer: applies voucher events from Kafka to PostgreSQL.
 * Configuration, signals and wiring only; the work is in wr_*.c.
 */
#include "wr_cli.h"
#include "wr_kafka.h"
#include "wr_writer.h"

#include "vc_admin.h"
#include "vc_config.h"
#include "vc_error.h"
#include "vc_kafka_conf.h"
#include "vc_log.h"
#include "vc_pg.h"
#include "vc_shutdown.h"
#include "vc_signal.h"

#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Set by the signal handler, read by the writer's loop: lock-free, so both are defined. */
static atomic_int stop_requested;
static wr_health_t health;

/*
 * vc_admin_ready_cb: ready while the loop runs with a live PostgreSQL
 * session, as a member of its consumer group, and no batch waits for a retry
 * (the runbook's meaning of ready; each is checked every second).
 */
static int ready_cb(void *arg, char *detail, size_t cap)
{
    (void)arg;
    if (!atomic_load(&health.running)) {
        snprintf(detail, cap, "not consuming yet");
        return 0;
    }
    if (!atomic_load(&health.pg_ok)) {
        snprintf(detail, cap, "no PostgreSQL session");
        return 0;
    }
    if (!atomic_load(&health.in_group)) {
        snprintf(detail, cap, "not a member of the consumer group (Kafka unreachable, or joining)");
        return 0;
    }
    if (atomic_load(&health.retrying)) {
        snprintf(detail, cap, "retrying a batch: PostgreSQL or the dead-letter topic unavailable");
        return 0;
    }
    return 1;
}

/* The first SIGTERM or SIGINT (vc_signal.h): the loops finish what they hold, then stop. */
static void on_signal(int sig)
{
    (void)sig;
    atomic_store(&stop_requested, 1);
}

#define CFG(field) offsetof(wr_config_t, field)

static const vc_cfg_param_t params[] = {
    {"kafka-brokers", "VOUCHER_KAFKA_BROKERS", VC_CFG_STRING, "127.0.0.1:15402", CFG(brokers), 0, 0,
     "Kafka bootstrap servers (comma-separated host:port; on a cluster name two or more "
     "brokers)"},
    {"pg-dsn", "VOUCHER_WRITER_PG_DSN,VOUCHER_PG_DSN", VC_CFG_STRING,
     "host=127.0.0.1 port=15400 dbname=voucher user=voucher_writer", CFG(pg_dsn), 0, 0,
     "PostgreSQL connection string"},
    {"log-level", "VOUCHER_LOG_LEVEL", VC_CFG_STRING, "info", CFG(log_level), 0, 0,
     "debug, info, warn or error"},
    {"group", "VOUCHER_WRITER_GROUP", VC_CFG_STRING, "voucher-writer", CFG(group), 0, 0,
     "Kafka consumer group"},
    {"topic", "VOUCHER_WRITER_TOPIC", VC_CFG_STRING, "voucher-events", CFG(topic), 0, 0,
     "topic to consume"},
    {"dlt-topic", "VOUCHER_WRITER_DLT_TOPIC", VC_CFG_STRING, "voucher-events.dlt", CFG(dlt_topic),
     0, 0, "dead-letter topic"},
    {"shutdown-timeout", "VOUCHER_SHUTDOWN_TIMEOUT", VC_CFG_MS, "20s", CFG(shutdown_timeout_ms), 100,
     3600000, "after SIGTERM, how long finishing the batch may take before the writer exits anyway"},
    {"batch", "VOUCHER_WRITER_BATCH", VC_CFG_INT, "2000", CFG(batch), 1, 100000,
     "most events applied in one transaction"},
    {"linger", "VOUCHER_WRITER_LINGER_MS", VC_CFG_MS, "20ms", CFG(linger_ms), 0, 60000,
     "longest wait for a batch to fill"},
    {"lanes", "VOUCHER_WRITER_LANES", VC_CFG_INT, "4", CFG(lanes), 1, 64,
     "apply lanes: PostgreSQL sessions applying batches side by side, each for its share of the "
     "partitions (partition % lanes), in partition order"},
    {"backoff-max", "VOUCHER_WRITER_BACKOFF_MAX_MS", VC_CFG_MS, "5s", CFG(backoff_max_ms), 10,
     600000, "longest wait between retries of a batch after a transient failure"},
    {"session-timeout", "VOUCHER_WRITER_SESSION_TIMEOUT_MS", VC_CFG_MS, "10s",
     CFG(session_timeout_ms), 6000, 300000,
     "Kafka session timeout: how soon the partitions of a writer that died move to another"},
    {"admin-addr", "VOUCHER_ADMIN_ADDR", VC_CFG_STRING_OFF, "127.0.0.1:15411", CFG(admin_addr),
     0, 0, "address of /healthz, /readyz and /metrics; empty turns it off"},
    {"kafka", "VOUCHER_KAFKA_CONF", VC_CFG_STRING, "", CFG(kafka_conf), 0, 0,
     "librdkafka settings for every Kafka client of the writer and of its dlt commands (SASL, "
     "TLS...), \"key=value,key=value\"; the flag may be repeated (one key=value each, added after "
     "the variable's)"},
    VC_CFG_END,
};

static const char summary[] =
    "Usage: voucher-writer [SETTINGS]\n"
    "       voucher-writer [SETTINGS] dlt list [--code C] [--order ID] [--partition P]"
    " [--since WHEN] [--state S]\n"
    "       voucher-writer [SETTINGS] dlt show [PARTITION:]OFFSET\n"
    "       voucher-writer [SETTINGS] dlt replay [[--partition P] --from N --to N | --order ID |"
    " --error-class C | --all] [--dry-run] [--operator NAME]\n"
    "       voucher-writer [SETTINGS] dlt discard [PARTITION:]OFFSET | --order ID"
    " [--operator NAME]\n\n"
    "Applies voucher events from Kafka to PostgreSQL in batches, one transaction per batch;\n"
    "events that can never apply go to the dead-letter topic, which the dlt commands read\n"
    "and replay. --from/--to are offsets of one partition of the dead-letter topic:\n"
    "--partition P says which, and is required when it has more than one. A replayed\n"
    "event goes to its voucher's partition (the gateway's partitioner, murmur2_random).\n"
    "Dead letters are parked in PostgreSQL: a replay sends a letter once, a discard has\n"
    "the reconciler give its use back (reason DISCARDED); both are audited with the\n"
    "operator (--operator, default $USER).";

/* The daemon; main() frees the Kafka settings this loads into kafka_extra, on every way out. */
static int run(int argc, char **argv, vc_kafka_settings_t *kafka_extra)
{
    wr_config_t cfg;
    vc_admin_t *admin = NULL;
    char err[512];
    int first_arg = argc, rc;

    memset(&cfg, 0, sizeof(cfg));
    /* --kafka may repeat: its pairs are taken out before the table sees argv. */
    if (vc_kafka_settings_load(kafka_extra, getenv(VC_KAFKA_CONF_ENV), &argc, argv, err,
                               sizeof(err)) != 0) {
        fprintf(stderr, "voucher-writer: %s\n", err);
        return 2;
    }
    rc = vc_config_load(params, &cfg, "voucher-writer", summary, argc, argv, &first_arg, err,
                        sizeof(err));
    if (rc == VC_CFG_EXIT)
        return 0;
    if (rc != VC_CFG_RUN) {
        fprintf(stderr, "voucher-writer: %s\n", err);
        return 2;
    }
    if (vc_log_init("writer", cfg.log_level) != 0) {
        fprintf(stderr, "voucher-writer: unknown log level \"%s\"\n", cfg.log_level);
        return 2;
    }
    if (wr_kafka_check_settings(kafka_extra, err, sizeof(err)) != 0 ||
        vc_pg_dsn_check(cfg.pg_dsn, err, sizeof(err)) != 0) {
        fprintf(stderr, "voucher-writer: %s\n", err);
        return 2;
    }
    cfg.kafka_extra = kafka_extra;

    if (vc_signal_install(on_signal) != 0) {
        fprintf(stderr, "voucher-writer: cannot install the signal handlers\n");
        return 1;
    }

    if (first_arg < argc) {
        if (strcmp(argv[first_arg], "dlt") != 0) {
            fprintf(stderr, "voucher-writer: unknown command \"%s\" (see --help)\n",
                    argv[first_arg]);
            return 2;
        }
        rc = wr_cli_dlt(&cfg, argc - first_arg - 1, argv + first_arg + 1, &stop_requested);
        return rc;
    }
    if (cfg.admin_addr && *cfg.admin_addr &&
        vc_admin_start(cfg.admin_addr, ready_cb, NULL, &admin, err, sizeof(err)) != 0) {
        fprintf(stderr, "voucher-writer: --admin-addr: %s\n", err);
        return 2;
    }
    if (vc_shutdown_watch(cfg.shutdown_timeout_ms) != 0) {
        fprintf(stderr, "voucher-writer: cannot start the shutdown watchdog\n");
        return 2;
    }
    rc = wr_writer_run(&cfg, &stop_requested, NULL, &health);
    vc_admin_stop(admin);
    return rc == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    vc_kafka_settings_t kafka_extra = VC_KAFKA_SETTINGS_INIT;
    int rc = run(argc, argv, &kafka_extra);

    vc_kafka_settings_free(&kafka_extra); /* whichever way run() ended */
    return rc;
}
