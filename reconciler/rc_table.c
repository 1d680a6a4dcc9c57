#include "rc_table.h"

void rc_table_header(FILE *table)
{
    fprintf(table, "%-20s %7s %7s %8s %10s %9s %6s %8s %9s  %s\n", "voucher", "limit", "used",
            "pg_left", "redis_left", "in_flight", "parked", "releasing", "unsent", "verdict");
}

void rc_table_row(FILE *table, const rc_voucher_t *v)
{
    char redis_left[24];

    if (v->n.redis_loaded)
        snprintf(redis_left, sizeof(redis_left), "%lld", (long long)v->n.redis_remaining);
    else
        snprintf(redis_left, sizeof(redis_left), "-");
    fprintf(table, "%-20s %7lld %7lld %8lld %10s %9lld %6lld %8lld %9lld  %s\n", v->code,
            (long long)v->n.total_limit, (long long)v->n.used_count,
            (long long)(v->n.total_limit - v->n.used_count), redis_left,
            (long long)v->n.in_flight_events, (long long)v->n.parked, (long long)v->n.releasing,
            (long long)(v->n.unsent_fresh + v->n.stranded), rc_verdict_name(v->verdict));
}
