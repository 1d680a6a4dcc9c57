/*
 * Extra librdkafka settings passed straight through (SASL, TLS, timeouts...):
 * the pairs of VOUCHER_KAFKA_CONF ("key=value,key=value") and of every
 * --kafka key=value on the command line. A daemon reads them once at start,
 * checks them against the keys each of its handles sets itself, and applies
 * them to every rd_kafka_conf_t it makes.
 *
 * The parsing is plain C; only vc_kafka_settings_apply() and
 * vc_kafka_settings_check() call librdkafka, which is why this module is a
 * library of its own (common_kafka_dep) and common_dep stays free of it.
 */
#ifndef VC_KAFKA_CONF_H
#define VC_KAFKA_CONF_H

#include <stddef.h>

/* The environment variable every daemon reads the pairs from. */
#define VC_KAFKA_CONF_ENV "VOUCHER_KAFKA_CONF"

/* librdkafka's rd_kafka_conf_t, without including librdkafka here. */
struct rd_kafka_conf_s;

typedef struct {
    char *key;        /* owned; never empty */
    char *value;      /* owned; may be empty */
    const char *from; /* where it came from, for errors: a string with static lifetime */
} vc_kafka_pair_t;

/* The pairs in the order given: the variable's first, then each --kafka. */
typedef struct {
    vc_kafka_pair_t *pairs;
    size_t n, cap;
} vc_kafka_settings_t;

#define VC_KAFKA_SETTINGS_INIT                                                                     \
    {                                                                                              \
        NULL, 0, 0                                                                                 \
    }

/*
 * Adds one "key=value" pair (copied; the value may hold ',' and '='). from
 * names its origin in errors ("option --kafka") and must outlive s. Returns 0,
 * VC_ERR_NOMEM, or VC_ERR_INVALID with err quoting the pair when it has no
 * '=' or an empty key.
 */
int vc_kafka_settings_add(vc_kafka_settings_t *s, const char *pair, const char *from, char *err,
                          size_t errlen);

/*
 * Adds every pair of list, "key=value,key=value" (empty items are skipped, so
 * a trailing comma is harmless; a value cannot hold ','). Same returns as
 * vc_kafka_settings_add(); on an error the pairs before the bad one stay.
 */
int vc_kafka_settings_add_list(vc_kafka_settings_t *s, const char *list, const char *from,
                               char *err, size_t errlen);

/*
 * Fills s from env_value (the value of VOUCHER_KAFKA_CONF, or NULL) and then
 * from every "--kafka KEY=VALUE" or "--kafka=KEY=VALUE" in argv before a
 * "--", which it takes out of argv (updating *argc, argv[*argc] = NULL) so
 * that the flag may repeat and vc_config_load() never sees it. Returns 0,
 * VC_ERR_NOMEM, or VC_ERR_INVALID with err naming the bad pair and where it
 * came from. The caller frees s (vc_kafka_settings_free) in every case.
 */
int vc_kafka_settings_load(vc_kafka_settings_t *s, const char *env_value, int *argc, char **argv,
                           char *err, size_t errlen);

/* Frees the pairs; s is empty and usable again afterwards. NULL is fine. */
void vc_kafka_settings_free(vc_kafka_settings_t *s);

/*
 * The partitioner of every producer of voucher-events: the gateway, the
 * reconciler's repairs and `voucher-writer dlt replay`. All events of a
 * voucher must land in one partition, whoever publishes them, because the
 * writer keeps order only within a partition: a release published elsewhere
 * than its reservation could be applied first. murmur2_random is the Java
 * client's partitioner (the one Kafka's own tools use for a key); kcat and
 * librdkafka default to consistent_random, which puts most codes elsewhere.
 * It is set here once, and vc_kafka_settings_apply() refuses the key on
 * every handle, so no passthrough setting can change it.
 */
#define VC_KAFKA_PARTITIONER "murmur2_random"

/*
 * One setting a handle makes itself, for vc_kafka_conf_new(); a table of
 * them ends with {NULL, NULL}. A NULL value (with a key) is skipped, so that
 * a table can hold a setting that depends on the daemon's configuration.
 */
typedef struct {
    const char *key, *value;
} vc_kafka_own_t;

/* The partitioner's entry in the table of every producer of voucher-events. */
#define VC_KAFKA_OWN_PARTITIONER {"partitioner", VC_KAFKA_PARTITIONER}

/*
 * The configuration of one Kafka handle, built the same way for every
 * daemon: bootstrap.servers and client.id, then own (the handle's settings,
 * borrowed), then the operator's passthrough settings extra (NULL: none) as
 * vc_kafka_settings_apply() applies them, with owner and reserved. Returns
 * the configuration (the caller owns it until rd_kafka_new() takes it), or
 * NULL with err set.
 */
struct rd_kafka_conf_s *vc_kafka_conf_new(const char *brokers, const char *client_id,
                                          const vc_kafka_own_t *own,
                                          const vc_kafka_settings_t *extra, const char *owner,
                                          const char *const *reserved, char *err, size_t errlen);

/*
 * One setting a daemon makes itself: rd_kafka_conf_set() on conf. Returns 0,
 * or VC_ERR_INVALID with err "kafka setting KEY=VALUE: librdkafka's reason".
 */
int vc_kafka_set(struct rd_kafka_conf_s *conf, const char *key, const char *value, char *err,
                 size_t errlen);

/*
 * Applies every pair of s (NULL: none) to conf (an rd_kafka_conf_t, still
 * owned by the caller) with rd_kafka_conf_set(), in order. reserved is a
 * NULL-terminated list of keys the handle sets itself and must keep (with
 * their aliases: librdkafka knows "acks" also as "request.required.acks");
 * "partitioner" is refused whatever reserved says (VC_KAFKA_PARTITIONER);
 * owner names that handle in the error ("the gateway"). Returns 0, or VC_ERR_INVALID with err
 * naming the key and where it came from, and either that owner sets it itself or librdkafka's own
 * error text. Pairs applied before the bad one stay in conf.
 */
int vc_kafka_settings_apply(const vc_kafka_settings_t *s, struct rd_kafka_conf_s *conf,
                            const char *owner, const char *const *reserved, char *err,
                            size_t errlen);

/*
 * What vc_kafka_settings_apply() would say, on a scratch configuration: lets
 * a daemon refuse bad settings at start, before it connects anything.
 * Returns 0, VC_ERR_NOMEM, or VC_ERR_INVALID with err set.
 */
int vc_kafka_settings_check(const vc_kafka_settings_t *s, const char *owner,
                            const char *const *reserved, char *err, size_t errlen);

#endif
