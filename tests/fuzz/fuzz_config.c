/*
 * libFuzzer harness of the settings parsers (common/vc_config.c): the input
 * is up to five lines, each given to one parser as the text of a setting:
 * host:port, a Redis URL (parsed, and redacted as logs show it), a
 * duration, an integer and a boolean (through vc_config_load(), as flags).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vc_config.h"

typedef struct {
    int64_t ms, n;
    int flag;
    const char *text;
} settings_t;

static const vc_cfg_param_t params[] = {
    {"ms", NULL, VC_CFG_MS, "1s", offsetof(settings_t, ms), 0, 86400000, "a duration"},
    {"n", NULL, VC_CFG_INT, "1", offsetof(settings_t, n), -5, 1000000, "an integer"},
    {"flag", NULL, VC_CFG_BOOL, "0", offsetof(settings_t, flag), 0, 0, "a boolean"},
    {"text", NULL, VC_CFG_STRING, "x", offsetof(settings_t, text), 0, 0, "a string"},
    VC_CFG_END,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *copy = malloc(size + 1), *line[5] = {0}, *p, err[512], host[256], redacted[512];
    char arg[5][600];
    char *argv[6];
    int port, n = 0;
    vc_redis_url_t url;
    settings_t s;

    if (!copy)
        return 0;
    memcpy(copy, data, size);
    copy[size] = '\0';
    for (p = copy; n < 5; n++) {
        line[n] = p;
        if (!(p = strchr(p, '\n')))
            break;
        *p++ = '\0';
    }
    for (int i = 0; i < 5; i++)
        if (!line[i])
            line[i] = "";
    (void)vc_parse_host_port(line[0], host, sizeof(host), &port);
    (void)vc_parse_redis_url(line[1], &url, err, sizeof(err));
    (void)vc_redis_url_redact(line[1], redacted, sizeof(redacted));
    if (!memchr(redacted, '\0', sizeof(redacted)))
        abort(); /* always NUL-terminated, says the contract */
    snprintf(arg[0], sizeof(arg[0]), "--ms=%s", line[2]);
    snprintf(arg[1], sizeof(arg[1]), "--n=%s", line[3]);
    snprintf(arg[2], sizeof(arg[2]), "--flag=%s", line[4]);
    snprintf(arg[3], sizeof(arg[3]), "--text=%s", line[1]);
    argv[0] = "fuzz";
    for (int i = 0; i < 4; i++)
        argv[i + 1] = arg[i];
    argv[5] = NULL;
    memset(&s, 0, sizeof(s));
    if (vc_config_load(params, &s, "fuzz", "fuzz", 5, argv, NULL, err, sizeof(err)) == VC_CFG_RUN &&
        (s.ms < 0 || s.ms > 86400000 || s.n < -5 || s.n > 1000000)) {
        fprintf(stderr, "fuzz_config: a value outside its bounds was accepted\n");
        abort();
    }
    free(copy);
    return 0;
}
