#include "gw_auth.h"

#include <string.h>

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
        size_t wlen;

        end = strchr(p, ',');
        if (!end)
            end = p + strlen(p);
        while (p < end && *p == ' ')
            p++;
        wlen = (size_t)(end - p);
        while (wlen > 0 && p[wlen - 1] == ' ')
            wlen--;
        if (wlen > 0)
            match |= token_differs(auth, glen, p, wlen) == 0;
    }
    return match;
}
