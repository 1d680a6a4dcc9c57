#include "rc_diff.h"

rc_verdict_t rc_judge(const rc_voucher_state_t *s)
{
    int64_t pg_remaining = s->total_limit - s->used_count;
    int64_t gap;

    if (s->live_rows != s->used_count)
        return RC_DRIFTED; /* PostgreSQL disagrees with itself: never explained by lag */
    if (!s->redis_loaded)
        return RC_NOT_LOADED;
    gap = pg_remaining - s->redis_remaining;
    if (gap == 0)
        return RC_CONSISTENT;
    /* Redis offering more than PostgreSQL allows could oversell: always drift. */
    if (gap < 0)
        return RC_DRIFTED;
    if (s->in_flight > 0 && gap <= s->in_flight)
        return RC_BEHIND;
    return RC_DRIFTED;
}

const char *rc_verdict_name(rc_verdict_t v)
{
    switch (v) {
    case RC_CONSISTENT:
        return "consistent";
    case RC_NOT_LOADED:
        return "not loaded";
    case RC_BEHIND:
        return "behind";
    case RC_DRIFTED:
        return "DRIFTED";
    }
    return "?";
}
