#include "vc_campaign_pg.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vc_audit.h"
#include "vc_error.h"
#include "vc_fault.h"
#include "vc_pg.h"

/* A line of COPY text at most: code, tab, id, tab, customer, newline. */
#define LINE_MAX (VC_CODE_MAX + 1 + 20 + 1 + 11 + 1 + 20 + 1)

/* Runs sql with params (vc_pg_exec); its result goes to *out, or is cleared when out is NULL. */
static int run(PGconn *conn, const char *sql, int n, const char *const *params, PGresult **out,
               char *err, size_t errlen)
{
    int rc = 0;
    PGresult *res = vc_pg_exec(conn, sql, n, params, &rc, err, errlen);

    if (res && out)
        *out = res;
    else
        PQclear(res);
    return rc;
}

int vc_campaign_create(PGconn *conn, const vc_campaign_spec_t *s, const vc_audit_who_t *who,
                       int64_t *id, char *err, size_t errlen)
{
    char length[16], count[24], amount[24], percent[16], cap[24], min_order[24], per[24],
        starts[24], ends[24], target[24], detail[48];
    vc_audit_action_t audit = {"campaign.create", target, VC_AUDIT_CAMPAIGN, 1, NULL, detail};
    const char *params[14];
    PGresult *res = NULL;
    int rc;

    if ((rc = run(conn, "BEGIN", 0, NULL, NULL, err, errlen)) != 0)
        return rc;
    /*
     * One creation at a time checks prefixes: without the lock two
     * creations of "AB" and "ABC" would each find no overlap and both commit.
     */
    if ((rc = run(conn, "SELECT pg_advisory_xact_lock(hashtext('campaign-prefix'))", 0, NULL,
                  NULL, err, errlen)) != 0)
        goto fail;
    if (s->prefix[0]) {
        const char *p[] = {s->prefix};

        if ((rc = run(conn,
                      "SELECT id, prefix FROM campaign WHERE prefix <> '' AND"
                      " (starts_with(prefix, $1) OR starts_with($1, prefix)) LIMIT 1",
                      1, p, &res, err, errlen)) != 0)
            goto fail;
        if (PQntuples(res) > 0) {
            snprintf(err, errlen,
                     "field \"prefix\" \"%s\" overlaps the prefix \"%s\" of campaign %s: a "
                     "prefix may neither equal, start, nor be started by another campaign's",
                     s->prefix, PQgetvalue(res, 0, 1), PQgetvalue(res, 0, 0));
            PQclear(res);
            vc_pg_rollback(conn);
            return VC_CAMPAIGN_E_PREFIX;
        }
        PQclear(res);
    }
    /* Between the check and the insert: where a creation without the lock would race. */
    VC_PAUSE("campaign-after-prefix-check");
    snprintf(length, sizeof(length), "%d", s->length);
    snprintf(count, sizeof(count), "%" PRId64, s->count);
    snprintf(amount, sizeof(amount), "%" PRId64, s->discount_amount);
    snprintf(percent, sizeof(percent), "%d", s->discount_percent);
    snprintf(cap, sizeof(cap), "%" PRId64, s->max_discount_amount);
    snprintf(min_order, sizeof(min_order), "%" PRId64, s->min_order_amount);
    snprintf(per, sizeof(per), "%" PRId64, s->per_customer_limit);
    snprintf(starts, sizeof(starts), "%" PRId64, s->starts_at_ms);
    snprintf(ends, sizeof(ends), "%" PRId64, s->ends_at_ms);
    params[0] = s->name;
    params[1] = s->alphabet->name;
    params[2] = s->prefix;
    params[3] = length;
    params[4] = s->check_symbol ? "true" : "false";
    params[5] = count;
    params[6] = amount;
    params[7] = s->discount_percent > 0 ? percent : NULL;
    params[8] = s->max_discount_amount > 0 ? cap : NULL;
    params[9] = min_order;
    params[10] = per;
    params[11] = starts;
    params[12] = ends;
    if ((rc = run(conn,
                  "INSERT INTO campaign (name, alphabet, prefix, code_length, check_symbol,"
                  " total_count, discount_amount, discount_percent, max_discount_amount,"
                  " min_order_amount, per_customer_limit, starts_at, ends_at)"
                  " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11,"
                  " to_timestamp($12::bigint / 1000.0), to_timestamp($13::bigint / 1000.0))"
                  " RETURNING id",
                  13, params, &res, err, errlen)) != 0)
        goto fail;
    *id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    /* Recorded with the row it creates: the codes follow in their own transactions. */
    snprintf(target, sizeof(target), "%" PRId64, *id);
    snprintf(detail, sizeof(detail), "%" PRId64 " codes", s->count);
    if ((rc = vc_audit_record(conn, who, &audit, err, errlen)) != 0)
        goto fail;
    if ((rc = run(conn, "COMMIT", 0, NULL, NULL, err, errlen)) != 0)
        return rc;
    return 0;
fail:
    vc_pg_rollback(conn);
    return rc;
}

/* Fills out from the row of res (the columns of LOAD_COLUMNS). */
#define LOAD_COLUMNS                                                                               \
    "id, name, state, alphabet, prefix, code_length, check_symbol, total_count,"                 \
    " generated_count, discount_amount, coalesce(discount_percent, 0),"                          \
    " coalesce(max_discount_amount, 0), min_order_amount, per_customer_limit,"                   \
    " (extract(epoch FROM starts_at) * 1000)::bigint,"                                             \
    " (extract(epoch FROM ends_at) * 1000)::bigint, used_count,"                                  \
    " state = 'GENERATING' AND updated_at < now() - make_interval(secs => $2)"

static void row_from(PGresult *res, int r, vc_campaign_row_t *out)
{
    vc_campaign_spec_t *s = &out->spec;

    memset(out, 0, sizeof(*out));
    out->id = strtoll(PQgetvalue(res, r, 0), NULL, 10);
    snprintf(s->name, sizeof(s->name), "%s", PQgetvalue(res, r, 1));
    snprintf(out->state, sizeof(out->state), "%s", PQgetvalue(res, r, 2));
    s->alphabet = vc_alphabet_find(PQgetvalue(res, r, 3));
    snprintf(s->prefix, sizeof(s->prefix), "%s", PQgetvalue(res, r, 4));
    s->length = atoi(PQgetvalue(res, r, 5));
    s->check_symbol = PQgetvalue(res, r, 6)[0] == 't';
    s->count = strtoll(PQgetvalue(res, r, 7), NULL, 10);
    out->generated = strtoll(PQgetvalue(res, r, 8), NULL, 10);
    s->discount_amount = strtoll(PQgetvalue(res, r, 9), NULL, 10);
    s->discount_percent = atoi(PQgetvalue(res, r, 10));
    s->max_discount_amount = strtoll(PQgetvalue(res, r, 11), NULL, 10);
    s->min_order_amount = strtoll(PQgetvalue(res, r, 12), NULL, 10);
    s->per_customer_limit = strtoll(PQgetvalue(res, r, 13), NULL, 10);
    s->starts_at_ms = strtoll(PQgetvalue(res, r, 14), NULL, 10);
    s->ends_at_ms = strtoll(PQgetvalue(res, r, 15), NULL, 10);
    out->used_count = strtoll(PQgetvalue(res, r, 16), NULL, 10);
    out->stalled = PQgetvalue(res, r, 17)[0] == 't';
}

static int load(PGconn *conn, const char *sql, int64_t id, vc_campaign_row_t *out, char *err,
                size_t errlen)
{
    char idbuf[24], stalled[16];
    const char *params[] = {idbuf, stalled};
    PGresult *res = NULL;
    int rc;

    snprintf(idbuf, sizeof(idbuf), "%" PRId64, id);
    snprintf(stalled, sizeof(stalled), "%d", VC_CAMPAIGN_STALLED_S);
    if ((rc = run(conn, sql, 2, params, &res, err, errlen)) != 0)
        return rc;
    if (PQntuples(res) == 0) {
        PQclear(res);
        return VC_CAMPAIGN_E_NOT_FOUND;
    }
    row_from(res, 0, out);
    PQclear(res);
    if (!out->spec.alphabet) {
        snprintf(err, errlen, "campaign %" PRId64 " has an unknown alphabet", id);
        return VC_ERR_PROTOCOL;
    }
    return 0;
}

int vc_campaign_load(PGconn *conn, int64_t id, vc_campaign_row_t *out, char *err, size_t errlen)
{
    return load(conn, "SELECT " LOAD_COLUMNS " FROM campaign WHERE id = $1::bigint", id, out, err,
                errlen);
}

int vc_campaign_list(PGconn *conn, int64_t after, int state, vc_campaign_row_t *out, int cap,
                     char *err, size_t errlen)
{
    char afterbuf[24], stalled[16], limit[16];
    const char *params[] = {afterbuf, stalled, limit};
    PGresult *res = NULL;
    int rc, n;

    snprintf(afterbuf, sizeof(afterbuf), "%" PRId64, after);
    snprintf(stalled, sizeof(stalled), "%d", VC_CAMPAIGN_STALLED_S);
    snprintf(limit, sizeof(limit), "%d", cap);
    if ((rc = run(conn,
                  state < 0   ? "SELECT " LOAD_COLUMNS " FROM campaign WHERE ($1::bigint = 0 OR"
                                " id < $1::bigint) ORDER BY id DESC LIMIT $3::int"
                  : state > 0 ? "SELECT " LOAD_COLUMNS " FROM campaign WHERE ($1::bigint = 0 OR"
                                " id < $1::bigint) AND state = 'ACTIVE' ORDER BY id DESC"
                                " LIMIT $3::int"
                              : "SELECT " LOAD_COLUMNS " FROM campaign WHERE ($1::bigint = 0 OR"
                                " id < $1::bigint) AND state <> 'ACTIVE' ORDER BY id DESC"
                                " LIMIT $3::int",
                  3, params, &res, err, errlen)) != 0)
        return rc;
    n = PQntuples(res);
    for (int r = 0; r < n && r < cap; r++)
        row_from(res, r, &out[r]);
    PQclear(res);
    return n < cap ? n : cap;
}

int vc_campaign_load_usage(PGconn *conn, int64_t id, vc_campaign_row_t *out, char *err,
                           size_t errlen)
{
    char idtext[24];
    const char *params[] = {idtext};
    PGresult *res;
    int rc;

    snprintf(idtext, sizeof(idtext), "%lld", (long long)id);
    if (!(res = vc_pg_exec(conn,
                           "SELECT count(*) FILTER (WHERE status = 'RESERVED'),"
                           " count(*) FILTER (WHERE status = 'CONFIRMED')"
                           " FROM campaign_redemption WHERE campaign_id = $1::bigint",
                           1, params, &rc, err, errlen)))
        return rc;
    out->held = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    out->redeemed = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
    PQclear(res);
    out->free = out->generated - out->held - out->redeemed;
    if (out->free < 0)
        out->free = 0;
    out->has_usage = 1;
    return 0;
}

int vc_campaign_deactivate(PGconn *conn, int64_t id, const vc_audit_who_t *who,
                           vc_campaign_row_t *out, char *err, size_t errlen)
{
    char target[24], *before = NULL;
    vc_audit_action_t audit = {"campaign.deactivate", target, VC_AUDIT_CAMPAIGN, 1, NULL, NULL};
    int rc;

    snprintf(target, sizeof(target), "%" PRId64, id);
    if ((rc = run(conn, "BEGIN", 0, NULL, NULL, err, errlen)) != 0)
        return rc;
    /* The row as the change finds it: the UPDATE below locks it for the rest. */
    if ((rc = run(conn, "SELECT 1 FROM campaign WHERE id = $1::bigint FOR UPDATE", 1,
                  (const char *const[]){target}, NULL, err, errlen)) != 0 ||
        (rc = vc_audit_snapshot(conn, VC_AUDIT_CAMPAIGN, target, &before, err, errlen)) != 0)
        goto fail;
    /* updated_at moves only on a real change, so a repeat changes nothing (and is recorded). */
    if ((rc = load(conn,
                   "UPDATE campaign SET state = 'INACTIVE',"
                   " updated_at = CASE WHEN state = 'INACTIVE' THEN updated_at ELSE now() END"
                   " WHERE id = $1::bigint RETURNING " LOAD_COLUMNS,
                   id, out, err, errlen)) != 0)
        goto fail;
    audit.before = before;
    if ((rc = vc_audit_record(conn, who, &audit, err, errlen)) != 0)
        goto fail;
    free(before);
    return run(conn, "COMMIT", 0, NULL, NULL, err, errlen);
fail:
    free(before);
    vc_pg_rollback(conn);
    return rc;
}

/* Appends v in decimal at buf + *n. */
static void put_i64(char *buf, size_t *n, int64_t v)
{
    char digits[24];
    size_t i = sizeof(digits);
    uint64_t u = (uint64_t)v;

    do
        digits[--i] = (char)('0' + u % 10);
    while ((u /= 10) != 0);
    memcpy(buf + *n, digits + i, sizeof(digits) - i);
    *n += sizeof(digits) - i;
}

/* A code of a batch and its place in the batch (which gives its seq and customer). */
typedef struct {
    char code[VC_CODE_MAX + 1];
    uint32_t index;
} drawn_t;

static int drawn_cmp(const void *a, const void *b)
{
    return strcmp(((const drawn_t *)a)->code, ((const drawn_t *)b)->code);
}

/*
 * Draws count codes into drawn and writes them to buf as COPY text for
 * campaign id, sorted by code: the primary key then takes them in one
 * left-to-right sweep instead of a million random descents (twice as fast,
 * tests/bench/campaign). The i-th code drawn gets seq first_seq + i and, for
 * i < bound, customer customers[i]. Returns the length, or a negative error
 * of the source.
 */
static long draw_batch(vc_codegen_t *g, int64_t id, int64_t first_seq, const int64_t *customers,
                       size_t bound, size_t count, drawn_t *drawn, char *buf)
{
    size_t n = 0;

    for (size_t i = 0; i < count; i++) {
        int len = vc_codegen_next(g, drawn[i].code);

        if (len < 0)
            return len;
        drawn[i].index = (uint32_t)i;
    }
    qsort(drawn, count, sizeof(*drawn), drawn_cmp);
    for (size_t i = 0; i < count; i++) {
        size_t len = strlen(drawn[i].code), k = drawn[i].index;

        memcpy(buf + n, drawn[i].code, len);
        n += len;
        buf[n++] = '\t';
        put_i64(buf, &n, id);
        buf[n++] = '\t';
        put_i64(buf, &n, first_seq + (int64_t)k);
        buf[n++] = '\t';
        if (k < bound) {
            put_i64(buf, &n, customers[k]);
        } else {
            memcpy(buf + n, "\\N", 2);
            n += 2;
        }
        buf[n++] = '\n';
    }
    return (long)n;
}

/* One batch: COPY, progress, COMMIT. 1: refused by the unique key (draw again). */
static int copy_batch(PGconn *conn, int64_t id, const char *text, size_t len, size_t count,
                      char *err, size_t errlen)
{
    char idbuf[24], countbuf[24];
    const char *params[] = {idbuf, countbuf};
    PGresult *res;
    int rc;

    if ((rc = run(conn, "BEGIN", 0, NULL, NULL, err, errlen)) != 0)
        return rc;
    res = PQexec(conn, "COPY campaign_code (code, campaign_id, seq, customer_id) FROM STDIN");
    if (PQresultStatus(res) != PGRES_COPY_IN) {
        rc = vc_pg_fail(conn, res, err, errlen);
        goto fail;
    }
    PQclear(res);
    if (PQputCopyData(conn, text, (int)len) != 1 || PQputCopyEnd(conn, NULL) != 1) {
        vc_pg_error_text(conn, NULL, err, errlen);
        rc = VC_ERR_UNAVAILABLE;
        goto fail;
    }
    res = PQgetResult(conn);
    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
        /* Only a code drawn twice is drawn again; any other key is a real error. */
        int collision = vc_pg_kind(conn, res) == VC_PG_UNIQUE &&
                        strcmp(vc_pg_constraint(res), "campaign_code_pkey") == 0;

        rc = vc_pg_fail(conn, res, err, errlen);
        while ((res = PQgetResult(conn)) != NULL)
            PQclear(res);
        vc_pg_rollback(conn);
        return collision ? 1 : rc;
    }
    PQclear(res);
    while ((res = PQgetResult(conn)) != NULL)
        PQclear(res);
    snprintf(idbuf, sizeof(idbuf), "%" PRId64, id);
    snprintf(countbuf, sizeof(countbuf), "%zu", count);
    /*
     * A code equal to a voucher's (in the stored form: '-' dropped) would be
     * hidden by the voucher, which the gateway looks up first: the batch is
     * drawn again, as for a collision. Under the lock POST /vouchers takes for
     * its own check, so a voucher created meanwhile is seen by one of the two.
     * Probed from the vouchers' side: a few thousand index lookups a batch.
     */
    if ((rc = run(conn, "SELECT pg_advisory_xact_lock(hashtext('" VC_CAMPAIGN_CODE_LOCK "'))",
                  0, NULL, NULL, err, errlen)) != 0)
        goto fail;
    if ((rc = run(conn,
                  "SELECT 1 FROM voucher v JOIN campaign_code c"
                  " ON c.code = replace(v.code, '-', '') WHERE c.campaign_id = $1::bigint"
                  " LIMIT 1",
                  1, params, &res, err, errlen)) != 0)
        goto fail;
    if (PQntuples(res) > 0) {
        PQclear(res);
        vc_pg_rollback(conn);
        return 1;
    }
    PQclear(res);
    if ((rc = run(conn,
                  "UPDATE campaign SET generated_count = generated_count + $2::int,"
                  " updated_at = now() WHERE id = $1::bigint",
                  2, params, NULL, err, errlen)) != 0)
        goto fail;
    return run(conn, "COMMIT", 0, NULL, NULL, err, errlen);
fail:
    vc_pg_rollback(conn);
    return rc;
}

static void set_state(PGconn *conn, int64_t id, const char *from, const char *to)
{
    char idbuf[24];
    const char *params[] = {idbuf, from, to};

    snprintf(idbuf, sizeof(idbuf), "%" PRId64, id);
    PQclear(PQexecParams(conn,
                         "UPDATE campaign SET state = $3, updated_at = now()"
                         " WHERE id = $1::bigint AND state = $2",
                         3, NULL, params, NULL, NULL, 0));
}

/*
 * Takes (pg_try_advisory_lock) or gives back (pg_advisory_unlock) the
 * session lock that lets one generator at a time write campaign id's codes:
 * a resume from the CLI while a gateway still generates would otherwise
 * draw codes for the same places (seq). Returns 0, VC_CAMPAIGN_E_BUSY when
 * another session holds it, or a negative VC_ERR_*.
 */
static int generation_lock(PGconn *conn, int64_t id, const char *fn, char *err, size_t errlen)
{
    char idbuf[24], sql[128];
    const char *params[] = {idbuf};
    PGresult *res = NULL;
    int rc;

    snprintf(idbuf, sizeof(idbuf), "%" PRId64, id);
    snprintf(sql, sizeof(sql),
             "SELECT %s(hashtext('campaign-generation'), ($1::bigint %% 2147483647)::int)", fn);
    if ((rc = run(conn, sql, 1, params, &res, err, errlen)) != 0)
        return rc;
    rc = PQgetvalue(res, 0, 0)[0] == 't' ? 0 : VC_CAMPAIGN_E_BUSY;
    PQclear(res);
    if (rc != 0 && strcmp(fn, "pg_try_advisory_lock") == 0)
        snprintf(err, errlen, "campaign %" PRId64 " is being generated by another session", id);
    return strcmp(fn, "pg_try_advisory_lock") == 0 ? rc : 0;
}

int vc_campaign_generate(PGconn *conn, int64_t id, const int64_t *customers, size_t n,
                         vc_random_fn random, vc_campaign_progress_cb progress, void *arg,
                         char *err, size_t errlen)
{
    vc_campaign_row_t row;
    vc_codegen_t *g = NULL;
    drawn_t *drawn = NULL;
    char *text = NULL;
    int rc, collisions = 0;

    if ((rc = generation_lock(conn, id, "pg_try_advisory_lock", err, errlen)) != 0)
        return rc;
    if ((rc = vc_campaign_load(conn, id, &row, err, errlen)) != 0)
        goto unlock;
    if (strcmp(row.state, "GENERATING") != 0 && strcmp(row.state, "FAILED") != 0) {
        snprintf(err, errlen, "campaign %" PRId64 " is %s, not generating", id, row.state);
        rc = VC_CAMPAIGN_E_BUSY;
        goto unlock;
    }
    if (strcmp(row.state, "FAILED") == 0)
        set_state(conn, id, "FAILED", "GENERATING");
    g = malloc(sizeof(*g));
    text = malloc((size_t)VC_CAMPAIGN_BATCH * LINE_MAX);
    drawn = malloc((size_t)VC_CAMPAIGN_BATCH * sizeof(*drawn));
    if (!g || !text || !drawn) {
        rc = VC_ERR_NOMEM;
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    vc_codegen_init(g, &row.spec, random, NULL);
    while (row.generated < row.spec.count) {
        size_t count = (size_t)(row.spec.count - row.generated), bound = 0;
        long len;

        if (count > VC_CAMPAIGN_BATCH)
            count = VC_CAMPAIGN_BATCH;
        /* Bound codes first: the first n rows are the customers' in order. */
        if ((size_t)row.generated < n) {
            bound = n - (size_t)row.generated;
            if (bound > count)
                bound = count;
        }
        if ((len = draw_batch(g, id, row.generated + 1, bound ? customers + row.generated : NULL,
                              bound, count, drawn, text)) < 0) {
            rc = (int)len;
            snprintf(err, errlen, "the random source failed");
            goto out;
        }
        rc = copy_batch(conn, id, text, (size_t)len, count, err, errlen);
        if (rc == 1) {
            /* A code drawn twice: the key refused the batch; draw it again. */
            if (++collisions > 10) {
                rc = VC_ERR_INVALID;
                snprintf(err, errlen, "ten batches in a row collided: the code space is full");
                goto out;
            }
            continue;
        }
        if (rc != 0)
            goto out;
        collisions = 0;
        row.generated += (int64_t)count;
        if (progress && progress(arg, row.generated, row.spec.count) != 0)
            goto out; /* stopped: stays GENERATING, resumable */
    }
    set_state(conn, id, "GENERATING", "ACTIVE");
out:
    if (rc < 0)
        set_state(conn, id, "GENERATING", "FAILED");
    free(drawn);
    free(text);
    free(g);
unlock:
    generation_lock(conn, id, "pg_advisory_unlock", err, errlen);
    return rc;
}

int vc_campaign_codes_page(PGconn *conn, int64_t id, size_t prefix_len, int64_t *after, int limit,
                           char *buf, size_t cap, size_t *len, char *err, size_t errlen)
{
    char idbuf[24], afterbuf[24], limbuf[16];
    const char *params[] = {idbuf, afterbuf, limbuf};
    PGresult *res = NULL;
    size_t n = 0;
    int rows, rc;

    snprintf(idbuf, sizeof(idbuf), "%" PRId64, id);
    snprintf(afterbuf, sizeof(afterbuf), "%" PRId64, *after);
    snprintf(limbuf, sizeof(limbuf), "%d", limit);
    if ((rc = run(conn,
                  "SELECT code, customer_id, seq FROM campaign_code WHERE campaign_id = $1::bigint"
                  " AND seq > $2::int ORDER BY seq LIMIT $3::int",
                  3, params, &res, err, errlen)) != 0)
        return rc;
    rows = PQntuples(res);
    for (int i = 0; i < rows; i++) {
        size_t shown = vc_campaign_display(PQgetvalue(res, i, 0), prefix_len, buf + n, cap - n);

        if (shown == 0 || cap - n - shown < 24) {
            PQclear(res);
            snprintf(err, errlen, "page buffer too small");
            return VC_ERR_TOO_LARGE;
        }
        n += shown;
        buf[n++] = ',';
        if (!PQgetisnull(res, i, 1)) {
            size_t c = strlen(PQgetvalue(res, i, 1));
            memcpy(buf + n, PQgetvalue(res, i, 1), c);
            n += c;
        }
        buf[n++] = '\n';
    }
    if (rows > 0)
        *after = strtoll(PQgetvalue(res, rows - 1, 2), NULL, 10);
    PQclear(res);
    *len = n;
    return rows;
}
