#include "rc_agg.h"
#include "vc_model.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The index of a state letter in the arrays of rc_agg_t, or -1. */
static int state_index(char letter)
{
    switch (letter) {
    case VC_STATE_HELD:
        return RC_AGG_HELD;
    case VC_STATE_CONFIRMED:
        return RC_AGG_CONFIRMED;
    case VC_STATE_CANCEL_BEGUN:
        return RC_AGG_CANCEL_BEGUN;
    case VC_STATE_EXPIRY_BEGUN:
        return RC_AGG_EXPIRY_BEGUN;
    case VC_STATE_RELEASED:
        return RC_AGG_RELEASED;
    default:
        return -1;
    }
}

void rc_agg_field(rc_agg_t *a, const char *field, const char *value)
{
    char *end;
    long long n;
    int i;

    errno = 0;
    n = strtoll(value, &end, 10);
    if (errno != 0 || end == value || *end != '\0') {
        a->malformed = 1;
        return;
    }
    if (strcmp(field, "?") == 0) {
        a->unreadable = n;
        return;
    }
    if (!field[0] || (i = state_index(field[0])) < 0) {
        a->malformed = 1;
        return;
    }
    if (field[1] == '\0')
        a->count[i] = n;
    else if (strcmp(field + 1, "_customers") == 0)
        a->customers[i] = n;
    else
        a->malformed = 1;
}

rc_agg_outcome_t rc_agg_compare(const rc_agg_t *redis, const rc_agg_t *pg, rc_agg_diff_t *diff)
{
    static const int kept[] = {RC_AGG_HELD, RC_AGG_CONFIRMED, RC_AGG_RELEASED};
    int64_t sum = redis->unreadable;

    memset(diff, 0, sizeof(*diff));
    for (int i = 0; i < RC_AGG_STATES; i++)
        sum += redis->count[i];
    /*
     * No aggregate beside an empty orders hash is an empty aggregate: a
     * voucher nobody reserved yet. Beside a hash with orders, none was kept.
     */
    if (!pg->present || (!redis->present && redis->size > 0))
        return RC_AGG_ABSENT;
    if (redis->malformed || sum != redis->size || redis->unreadable != 0 ||
        redis->count[RC_AGG_CANCEL_BEGUN] != 0 || redis->count[RC_AGG_EXPIRY_BEGUN] != 0)
        return RC_AGG_UNSOUND;
    for (size_t k = 0; k < sizeof(kept) / sizeof(kept[0]); k++) {
        int i = kept[k];
        diff->count[i] = pg->count[i] - redis->count[i];
        diff->customers[i] = pg->customers[i] - redis->customers[i];
    }
    return RC_AGG_COMPARED;
}

int rc_agg_equal(const rc_agg_t *a, const rc_agg_t *b)
{
    return a->present == b->present && a->unreadable == b->unreadable && a->size == b->size &&
           a->malformed == b->malformed && memcmp(a->count, b->count, sizeof(a->count)) == 0 &&
           memcmp(a->customers, b->customers, sizeof(a->customers)) == 0;
}

int rc_agg_diff_zero(const rc_agg_diff_t *d)
{
    static const rc_agg_diff_t zero;

    return rc_agg_diff_equal(d, &zero);
}

int rc_agg_diff_equal(const rc_agg_diff_t *a, const rc_agg_diff_t *b)
{
    return memcmp(a->count, b->count, sizeof(a->count)) == 0 &&
           memcmp(a->customers, b->customers, sizeof(a->customers)) == 0;
}

rc_agg_verdict_t rc_agg_judge(const rc_agg_t *redis, const rc_agg_t *pg, const rc_agg_base_t *base,
                              rc_agg_diff_t *diff, int *compared)
{
    rc_agg_outcome_t outcome = rc_agg_compare(redis, pg, diff);

    *compared = outcome == RC_AGG_COMPARED;
    if (outcome == RC_AGG_ABSENT)
        return RC_AGG_OLD_RULE;
    if (base->known && ((*compared && rc_agg_diff_equal(diff, &base->diff)) ||
                        (rc_agg_equal(redis, &base->redis) && rc_agg_equal(pg, &base->pg))))
        return RC_AGG_SETTLED;
    return *compared && rc_agg_diff_zero(diff) ? RC_AGG_SETTLED : RC_AGG_READ_NOW;
}

void rc_agg_remember(rc_agg_base_t *base, int read, int consistent, const rc_agg_t *redis,
                     const rc_agg_t *pg, const rc_agg_diff_t *diff)
{
    base->known = read && consistent;
    base->diff = *diff;
    base->redis = *redis;
    base->pg = *pg;
}
