#include "vc_kafka_conf.h"
#include "vc_error.h"

#include <ctype.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FROM_ENV "environment variable " VC_KAFKA_CONF_ENV
#define FROM_FLAG "option --kafka"

int vc_kafka_settings_add(vc_kafka_settings_t *s, const char *pair, const char *from, char *err,
                          size_t errlen)
{
    const char *eq = strchr(pair, '='), *key = pair, *key_end = eq;
    vc_kafka_pair_t *p;

    /* Keys never hold spaces: "a=1, b=2" means what it looks like. */
    while (isspace((unsigned char)*key))
        key++;
    while (key_end && key_end > key && isspace((unsigned char)key_end[-1]))
        key_end--;
    if (!eq || key_end == key) {
        snprintf(err, errlen, "%s: kafka setting \"%.200s\": expected key=value", from, pair);
        return VC_ERR_INVALID;
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 8;
        vc_kafka_pair_t *grown = realloc(s->pairs, cap * sizeof(*grown));
        if (!grown)
            goto nomem;
        s->pairs = grown;
        s->cap = cap;
    }
    p = &s->pairs[s->n];
    p->key = strndup(key, (size_t)(key_end - key));
    p->value = strdup(eq + 1);
    p->from = from;
    if (!p->key || !p->value) {
        free(p->key);
        free(p->value);
        goto nomem;
    }
    s->n++;
    return 0;
nomem:
    snprintf(err, errlen, "out of memory");
    return VC_ERR_NOMEM;
}

int vc_kafka_settings_add_list(vc_kafka_settings_t *s, const char *list, const char *from,
                               char *err, size_t errlen)
{
    char *copy = strdup(list), *save = NULL;
    int rc = 0;

    if (!copy) {
        snprintf(err, errlen, "out of memory");
        return VC_ERR_NOMEM;
    }
    for (char *item = strtok_r(copy, ",", &save); item && rc == 0;
         item = strtok_r(NULL, ",", &save)) {
        if (strspn(item, " \t") == strlen(item))
            continue;
        rc = vc_kafka_settings_add(s, item, from, err, errlen);
    }
    free(copy);
    return rc;
}

int vc_kafka_settings_load(vc_kafka_settings_t *s, const char *env_value, int *argc, char **argv,
                           char *err, size_t errlen)
{
    int kept = 1, rc;

    if (env_value && (rc = vc_kafka_settings_add_list(s, env_value, FROM_ENV, err, errlen)) != 0)
        return rc;
    for (int i = 1; i < *argc; i++) {
        const char *value = NULL;

        if (strcmp(argv[i], "--") == 0) {
            while (i < *argc)
                argv[kept++] = argv[i++];
            break;
        }
        if (strcmp(argv[i], "--kafka") == 0) {
            if (i + 1 >= *argc) {
                snprintf(err, errlen, "option --kafka needs a value (key=value)");
                return VC_ERR_INVALID;
            }
            value = argv[++i];
        } else if (strncmp(argv[i], "--kafka=", 8) == 0) {
            value = argv[i] + 8;
        } else {
            argv[kept++] = argv[i];
            continue;
        }
        if ((rc = vc_kafka_settings_add(s, value, FROM_FLAG, err, errlen)) != 0)
            return rc;
    }
    *argc = kept;
    argv[kept] = NULL;
    return 0;
}

void vc_kafka_settings_free(vc_kafka_settings_t *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++) {
        free(s->pairs[i].key);
        free(s->pairs[i].value);
    }
    free(s->pairs);
    s->pairs = NULL;
    s->n = s->cap = 0;
}

/* Keys no handle of any daemon lets a passthrough setting change. */
static const char *const always_reserved[] = {"partitioner", NULL};

static int is_reserved(const char *key, const char *const *reserved)
{
    for (const char *const *r = reserved; r && *r; r++)
        if (strcmp(*r, key) == 0) /* librdkafka's names are case-sensitive too */
            return 1;
    return 0;
}

int vc_kafka_set(struct rd_kafka_conf_s *conf, const char *key, const char *value, char *err,
                 size_t errlen)
{
    char why[512];

    if (rd_kafka_conf_set(conf, key, value, why, sizeof(why)) != RD_KAFKA_CONF_OK) {
        snprintf(err, errlen, "kafka setting %s=%s: %s", key, value, why);
        return VC_ERR_INVALID;
    }
    return 0;
}

rd_kafka_conf_t *vc_kafka_conf_new(const char *brokers, const char *client_id,
                                   const vc_kafka_own_t *own, const vc_kafka_settings_t *extra,
                                   const char *owner, const char *const *reserved, char *err,
                                   size_t errlen)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();

    if (!conf) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (vc_kafka_set(conf, "bootstrap.servers", brokers, err, errlen) != 0 ||
        vc_kafka_set(conf, "client.id", client_id, err, errlen) != 0)
        goto fail;
    for (; own->key; own++)
        if (own->value && vc_kafka_set(conf, own->key, own->value, err, errlen) != 0)
            goto fail;
    if (vc_kafka_settings_apply(extra, conf, owner, reserved, err, errlen) != 0)
        goto fail;
    return conf;
fail:
    rd_kafka_conf_destroy(conf);
    return NULL;
}

int vc_kafka_settings_apply(const vc_kafka_settings_t *s, struct rd_kafka_conf_s *conf,
                            const char *owner, const char *const *reserved, char *err,
                            size_t errlen)
{
    char errstr[512];

    for (size_t i = 0; s && i < s->n; i++) {
        const vc_kafka_pair_t *p = &s->pairs[i];

        if (is_reserved(p->key, always_reserved)) {
            snprintf(err, errlen,
                     "%s: kafka setting %s: every producer of voucher-events uses %s, so that "
                     "all events of a voucher share a partition and stay in order",
                     p->from, p->key, VC_KAFKA_PARTITIONER);
            return VC_ERR_INVALID;
        }
        if (is_reserved(p->key, reserved)) {
            snprintf(err, errlen,
                     "%s: kafka setting %s: %s sets it itself (its guarantees depend on it)",
                     p->from, p->key, owner);
            return VC_ERR_INVALID;
        }
        /* The value stays out of the message: it may be a password. */
        if (rd_kafka_conf_set(conf, p->key, p->value, errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK) {
            snprintf(err, errlen, "%s: kafka setting %s: %s", p->from, p->key, errstr);
            return VC_ERR_INVALID;
        }
    }
    return 0;
}

int vc_kafka_settings_check(const vc_kafka_settings_t *s, const char *owner,
                            const char *const *reserved, char *err, size_t errlen)
{
    rd_kafka_conf_t *scratch;
    int rc;

    if (!s || s->n == 0)
        return 0;
    if (!(scratch = rd_kafka_conf_new())) {
        snprintf(err, errlen, "out of memory");
        return VC_ERR_NOMEM;
    }
    rc = vc_kafka_settings_apply(s, scratch, owner, reserved, err, errlen);
    rd_kafka_conf_destroy(scratch);
    return rc;
}
