#include "gw_auth.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "vc_error.h"

/*
 * Whether given (glen bytes) equals want (wlen bytes), in a time that depends
 * on wlen only: every byte of want is compared, whatever matched before.
 */
static unsigned token_differs(const char *given, size_t glen, const char *want, size_t wlen)
{
    unsigned diff = glen != wlen;

    for (size_t i = 0; i < wlen; i++)
        diff |= (unsigned)(unsigned char)want[i] ^
                (unsigned)(unsigned char)(i < glen ? given[i] : 0);
    return diff;
}

/*
 * Finds the next token of a list from p: *len is its length without the
 * spaces around it (0 for an empty entry). Returns where the entry ends (a
 * comma or the NUL), as gw_bearer_authorized() splits the list.
 */
static const char *token_next(const char *p, const char **token, size_t *len)
{
    const char *end = strchr(p, ',');

    if (!end)
        end = p + strlen(p);
    while (p < end && *p == ' ')
        p++;
    *token = p;
    *len = (size_t)(end - p);
    while (*len > 0 && p[*len - 1] == ' ')
        (*len)--;
    return end;
}

/*
 * The placeholders the templates and the runbook show where a token goes:
 * one left in place would let in anyone who read them. Matched anywhere in
 * a token, whatever the case, so that padding one to the length does not
 * pass either.
 */
static const char *const placeholders[] = {"CHANGE-ME", "CHANGEME", "CHANGE_ME"};

/* Whether token (len bytes) contains a placeholder, in any case. */
static int token_is_placeholder(const char *token, size_t len)
{
    for (size_t k = 0; k < sizeof(placeholders) / sizeof(placeholders[0]); k++) {
        size_t plen = strlen(placeholders[k]);
        for (size_t i = 0; i + plen <= len; i++)
            if (strncasecmp(token + i, placeholders[k], plen) == 0)
                return 1;
    }
    return 0;
}

int gw_token_list_check(const char *tokens, char *err, size_t errlen)
{
    const char *p, *end, *token;
    size_t len;
    int n = 0, seen = 0;

    if (!tokens || !tokens[0])
        return 0;
    for (p = tokens; *p; p = *end ? end + 1 : end) {
        end = token_next(p, &token, &len);
        n++;
        if (len == 0)
            continue;
        seen++;
        if (token_is_placeholder(token, len)) {
            snprintf(err, errlen,
                     "token %d of the list is the template's placeholder (CHANGE-ME): set a "
                     "secret of at least %d characters (deploy/README.md, \"Authentication and "
                     "secrets\")",
                     n, GW_TOKEN_MIN_LEN);
            return VC_ERR_INVALID;
        }
        if (len < GW_TOKEN_MIN_LEN) {
            snprintf(err, errlen,
                     "token %d of the list has %zu characters, fewer than %d: a token must "
                     "not be guessable (deploy/README.md, \"Authentication and secrets\")",
                     n, len, GW_TOKEN_MIN_LEN);
            return VC_ERR_INVALID;
        }
    }
    if (!seen) {
        snprintf(err, errlen, "the list holds no token (empty it to turn the setting off)");
        return VC_ERR_INVALID;
    }
    return 0;
}

int gw_bearer_authorized(const char *auth, const char *tokens)
{
    static const char prefix[] = "Bearer ";
    const char *p, *end;
    size_t glen;
    int match = 0;

    if (!tokens || !auth || strncmp(auth, prefix, sizeof(prefix) - 1) != 0)
        return 0;
    auth += sizeof(prefix) - 1;
    glen = strlen(auth);
    if (glen == 0)
        return 0;
    /*
     * Every token of the list is compared, also after one matched, so the
     * time tells neither which token matched nor how much of one did; only
     * the number and lengths of the tokens set, which are no secret.
     */
    for (p = tokens; *p; p = *end ? end + 1 : end) {
        const char *want;
        size_t wlen;

        end = token_next(p, &want, &wlen);
        if (wlen > 0)
            match |= token_differs(auth, glen, want, wlen) == 0;
    }
    return match;
}
