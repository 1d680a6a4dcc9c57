#include "rc_leader.h"
#include "vc_error.h"

#include <stdio.h>
#include <string.h>

int rc_leader_parse(const char *text, int64_t *generation)
{
    int64_t g = 0;

    *generation = 0;
    if (!text || !*text)
        return VC_ERR_PROTOCOL;
    for (const char *p = text; *p; p++) {
        if (*p < '0' || *p > '9' || g > (RC_LEADER_MAX - (*p - '0')) / 10)
            return VC_ERR_PROTOCOL; /* not a decimal, or past what Lua compares exactly */
        g = g * 10 + (*p - '0');
    }
    if (g < 1)
        return VC_ERR_PROTOCOL;
    *generation = g;
    return 0;
}

int rc_leader_key(const char *key, char *out, size_t cap)
{
    const char *open = strchr(key, '{'), *close = open ? strchr(open + 1, '}') : NULL;
    int n;

    /* Redis's hash tag: the first '{' and the first '}' after it, something between. */
    if (!close || close == open + 1)
        return VC_ERR_INVALID;
    n = snprintf(out, cap, "%.*s:leader", (int)(close + 1 - key), key);
    return n < 0 || (size_t)n >= cap ? VC_ERR_INVALID : 0;
}

/* A generation's text in a refusal: "-" (none) is 0; 0 and *v set, else -1. */
static int refusal_number(const char *text, int64_t *v)
{
    if (strcmp(text, "-") == 0) {
        *v = 0;
        return 0;
    }
    return rc_leader_parse(text, v) == 0 ? 0 : -1;
}

int rc_leader_refusal(const char *text, size_t len, rc_leader_refusal_t *r)
{
    char buf[2 * RC_LEADER_KEY_MAX], word[20], key[RC_LEADER_KEY_MAX], held[24], token[24];
    rc_leader_refusal_t got = {0};

    if (len >= sizeof(buf))
        return 0;
    memcpy(buf, text, len);
    buf[len] = '\0';
    /* "WORD KEY HELD TOKEN", as leader.lua and leader_mark.lua write it. */
    _Static_assert(RC_LEADER_KEY_MAX == 80, "the %79s below is RC_LEADER_KEY_MAX - 1");
    if (sscanf(buf, "%19s %79s %23s %23s", word, key, held, token) != 4 ||
        refusal_number(held, &got.held) != 0 || rc_leader_parse(token, &got.token) != 0)
        return 0;
    if (strcmp(word, RC_LEADER_STALE) == 0 && got.held > got.token)
        got.why = RC_LEADER_REFUSED_STALE;
    else if (strcmp(word, RC_LEADER_UNMARKED) == 0 && got.held < got.token)
        got.why = RC_LEADER_REFUSED_UNMARKED;
    else
        return 0;
    snprintf(got.key, sizeof(got.key), "%s", key);
    *r = got;
    return 1;
}

int rc_leader_error(const rc_leader_refusal_t *r)
{
    return r->why == RC_LEADER_REFUSED_STALE ? VC_ERR_STALE_LEADER : VC_ERR_LEADER_UNMARKED;
}
