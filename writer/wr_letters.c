#include "wr_letters.h"

#include "vc_error.h"
#include "vc_pg.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct wr_letters {
    PGconn *conn;
};

#define LETTER_COLUMNS                                                                             \
    "id, state, coalesce(voucher_code, ''), coalesce(order_id, ''), coalesce(event_type, ''),"    \
    " CASE WHEN dlt_offset IS NULL THEN '' ELSE dlt_topic || '/' || dlt_partition || '/' ||"      \
    " dlt_offset END, coalesce(dlt_partition, -1), coalesce(dlt_offset, -1),"                     \
    " coalesce(to_char(replay_sent_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), ''),"\
    " coalesce(to_char(settled_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), ''),"   \
    " coalesce(to_char(replay_claimed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'),"\
    " ''), coalesce(replay_claim, '')"

#define CLAIM_STR_(x) #x
#define CLAIM_STR(x) CLAIM_STR_(x)
/* A claim of another replay that still holds (WR_REPLAY_CLAIM_TTL_S), in SQL. */
#define CLAIM_LIVE                                                                                 \
    "(replay_claimed_at IS NOT NULL AND replay_claimed_at > now() - make_interval(secs => "      \
    CLAIM_STR(WR_REPLAY_CLAIM_TTL_S) "))"

int wr_letters_open(wr_letters_t **out, const char *dsn, char *err, size_t errlen)
{
    wr_letters_t *l = calloc(1, sizeof(*l));

    *out = NULL;
    if (!l) {
        snprintf(err, errlen, "out of memory");
        return VC_ERR_NOMEM;
    }
    if (!(l->conn = vc_pg_connect(dsn, "voucher-writer dlt", err, errlen))) {
        free(l);
        return VC_ERR_UNAVAILABLE;
    }
    *out = l;
    return 0;
}

void wr_letters_close(wr_letters_t *l)
{
    if (!l)
        return;
    PQfinish(l->conn);
    free(l);
}

static void copy(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src);
}

static void letter_of(PGresult *res, int row, wr_letter_t *out)
{
    memset(out, 0, sizeof(*out));
    out->id = strtoll(PQgetvalue(res, row, 0), NULL, 10);
    copy(out->state, sizeof(out->state), PQgetvalue(res, row, 1));
    copy(out->code, sizeof(out->code), PQgetvalue(res, row, 2));
    copy(out->order_id, sizeof(out->order_id), PQgetvalue(res, row, 3));
    copy(out->event_type, sizeof(out->event_type), PQgetvalue(res, row, 4));
    copy(out->dlt_at, sizeof(out->dlt_at), PQgetvalue(res, row, 5));
    out->dlt_partition = (int32_t)strtol(PQgetvalue(res, row, 6), NULL, 10);
    out->dlt_offset = strtoll(PQgetvalue(res, row, 7), NULL, 10);
    copy(out->replay_sent_at, sizeof(out->replay_sent_at), PQgetvalue(res, row, 8));
    copy(out->settled_at, sizeof(out->settled_at), PQgetvalue(res, row, 9));
    copy(out->replay_claimed_at, sizeof(out->replay_claimed_at), PQgetvalue(res, row, 10));
    copy(out->replay_claim, sizeof(out->replay_claim), PQgetvalue(res, row, 11));
}

/* Runs sql with params; returns its result (rows or command) or NULL with err set. */
static PGresult *run(wr_letters_t *l, const char *sql, int n, const char *const *values,
                     char *err, size_t errlen)
{
    int rc;

    return vc_pg_exec(l->conn, sql, n, values, &rc, err, errlen);
}

/* Runs a query for letters; copies up to cap into out. Returns the count or an error. */
static int letters(wr_letters_t *l, const char *sql, int n, const char *const *values,
                   wr_letter_t *out, size_t cap, char *err, size_t errlen)
{
    PGresult *res = run(l, sql, n, values, err, errlen);
    int rows;

    if (!res)
        return VC_ERR_UNAVAILABLE;
    rows = PQntuples(res);
    for (int r = 0; r < rows && (size_t)r < cap; r++)
        letter_of(res, r, &out[r]);
    PQclear(res);
    return (size_t)rows < cap ? rows : (int)cap;
}

/* The letter at one position of a topic: sql takes the topic, partition and offset as $1..$3. */
static int letter_at(wr_letters_t *l, const char *sql, const char *topic, int32_t partition,
                     int64_t offset, wr_letter_t *out, char *err, size_t errlen)
{
    char p[16], o[24];
    const char *values[] = {topic, p, o};

    snprintf(p, sizeof(p), "%d", (int)partition);
    snprintf(o, sizeof(o), "%lld", (long long)offset);
    return letters(l, sql, 3, values, out, 1, err, errlen);
}

int wr_letters_find(wr_letters_t *l, const char *topic, int32_t partition, int64_t offset,
                    wr_letter_t *out, char *err, size_t errlen)
{
    return letter_at(l,
                     "SELECT " LETTER_COLUMNS " FROM dead_letter WHERE original_topic = $1"
                     " AND original_partition = $2::int AND original_offset = $3::bigint",
                     topic, partition, offset, out, err, errlen);
}

int wr_letters_at(wr_letters_t *l, const char *dlt_topic, int32_t partition, int64_t offset,
                  wr_letter_t *out, char *err, size_t errlen)
{
    return letter_at(l,
                     "SELECT " LETTER_COLUMNS " FROM dead_letter WHERE dlt_topic = $1"
                     " AND dlt_partition = $2::int AND dlt_offset = $3::bigint",
                     dlt_topic, partition, offset, out, err, errlen);
}

int wr_letters_get(wr_letters_t *l, int64_t id, wr_letter_t *out, char *err, size_t errlen)
{
    char idtext[24];
    const char *values[] = {idtext};
    int rows;

    snprintf(idtext, sizeof(idtext), "%lld", (long long)id);
    rows = letters(l, "SELECT " LETTER_COLUMNS " FROM dead_letter WHERE id = $1::bigint", 1, values,
                   out, 1, err, errlen);
    if (rows == 0) {
        snprintf(err, errlen, "letter %lld is no longer in the register", (long long)id);
        return VC_ERR_PROTOCOL;
    }
    return rows < 0 ? rows : 0;
}

int wr_letters_of_order(wr_letters_t *l, const char *order_id, wr_letter_t *out, size_t cap,
                        char *err, size_t errlen)
{
    const char *values[] = {order_id};

    return letters(l, "SELECT " LETTER_COLUMNS " FROM dead_letter WHERE order_id = $1 ORDER BY id",
                   1, values, out, cap, err, errlen);
}

int wr_letters_park(wr_letters_t *l, const wr_letter_new_t *n, wr_letter_t *out, char *err,
                    size_t errlen)
{
    char dp[16], doff[24], p[16], o[24];
    const char *values[] = {n->code, n->order_id, n->event_type, n->dlt_topic, dp, doff,
                            n->topic, p, o, n->error_class, n->error_message, ""};
    PGresult *res;

    snprintf(dp, sizeof(dp), "%d", (int)n->dlt_partition);
    snprintf(doff, sizeof(doff), "%lld", (long long)n->dlt_offset);
    snprintf(p, sizeof(p), "%d", (int)n->partition);
    snprintf(o, sizeof(o), "%lld", (long long)n->offset);
    if (!(res = run(l,
                    "SELECT wr_dlt_park($1, $2, $3, $4, $5::int, $6::bigint, $7, $8::int,"
                    " $9::bigint, $10, $11, $12)",
                    12, values, err, errlen)))
        return VC_ERR_UNAVAILABLE;
    PQclear(res);
    return wr_letters_find(l, n->topic, n->partition, n->offset, out, err, errlen) == 1
               ? 0
               : VC_ERR_UNAVAILABLE;
}

/* BEGIN, then sql (with values), then the audit row, then COMMIT. */
static int with_audit(wr_letters_t *l, const char *sql, int n, const char *const *values,
                      int *changed, int64_t id, const char *action, const char *operator_name,
                      const char *done, const char *noop, char *err, size_t errlen)
{
    PGresult *res;
    int rc = VC_ERR_UNAVAILABLE, rows;

    if (!(res = run(l, "BEGIN", 0, NULL, err, errlen)))
        return rc;
    PQclear(res);
    if (!(res = run(l, sql, n, values, err, errlen)))
        goto out;
    rows = atoi(PQcmdTuples(res));
    PQclear(res);
    if (changed)
        *changed = rows > 0;
    if (wr_letters_audit(l, id, action, operator_name, rows > 0 ? done : noop, "", err, errlen) !=
        0)
        goto out;
    if (!(res = run(l, "COMMIT", 0, NULL, err, errlen)))
        goto out;
    PQclear(res);
    return 0;
out:
    vc_pg_rollback(l->conn);
    return rc;
}

int wr_letters_replay_claim(wr_letters_t *l, int64_t id, const char *claim, wr_letter_t *out,
                            char *err, size_t errlen)
{
    char idtext[24];
    const char *values[] = {idtext, claim};
    PGresult *res;
    int rows;

    snprintf(idtext, sizeof(idtext), "%lld", (long long)id);
    if (!(res = run(l,
                    "UPDATE dead_letter SET replay_claimed_at = now(), replay_claim = $2"
                    " WHERE id = $1::bigint AND state = 'parked' AND replay_sent_at IS NULL"
                    " AND NOT " CLAIM_LIVE,
                    2, values, err, errlen)))
        return VC_ERR_UNAVAILABLE;
    rows = atoi(PQcmdTuples(res));
    PQclear(res);
    if (rows > 0)
        return 1;
    /* Lost: the letter as it is now says to whom, or why. */
    return wr_letters_get(l, id, out, err, errlen);
}

int wr_letters_replay_unclaim(wr_letters_t *l, int64_t id, const char *claim, char *err,
                              size_t errlen)
{
    char idtext[24];
    const char *values[] = {idtext, claim};
    PGresult *res;

    snprintf(idtext, sizeof(idtext), "%lld", (long long)id);
    if (!(res = run(l,
                    "UPDATE dead_letter SET replay_claimed_at = NULL, replay_claim = NULL"
                    " WHERE id = $1::bigint AND replay_claim = $2 AND replay_sent_at IS NULL",
                    2, values, err, errlen)))
        return VC_ERR_UNAVAILABLE;
    PQclear(res);
    return 0;
}

int wr_letters_replay_sent(wr_letters_t *l, int64_t id, const char *operator_name, char *err,
                           size_t errlen)
{
    char idtext[24];
    const char *values[] = {idtext};

    snprintf(idtext, sizeof(idtext), "%lld", (long long)id);
    return with_audit(l,
                      "UPDATE dead_letter SET replay_sent_at = now() WHERE id = $1::bigint"
                      " AND state = 'parked'",
                      1, values, NULL, id, "replay", operator_name, "sent", "sent", err, errlen);
}

int wr_letters_discard(wr_letters_t *l, int64_t id, const char *operator_name, int *changed,
                       char *err, size_t errlen)
{
    char idtext[24];
    const char *values[] = {idtext};

    snprintf(idtext, sizeof(idtext), "%lld", (long long)id);
    return with_audit(l,
                      "UPDATE dead_letter SET state = 'discarded', settled_at = now()"
                      " WHERE id = $1::bigint AND state = 'parked' AND replay_sent_at IS NULL"
                      " AND NOT " CLAIM_LIVE,
                      1, values, changed, id, "discard", operator_name, "discarded", "noop", err,
                      errlen);
}

int wr_letters_audit(wr_letters_t *l, int64_t id, const char *action, const char *operator_name,
                     const char *outcome, const char *detail, char *err, size_t errlen)
{
    char idtext[24];
    const char *values[] = {idtext, action, operator_name, outcome, detail};
    PGresult *res;

    snprintf(idtext, sizeof(idtext), "%lld", (long long)id);
    if (!(res = run(l,
                    "INSERT INTO dead_letter_action (letter_id, action, operator, outcome, detail)"
                    " VALUES ($1::bigint, $2, $3, $4, $5)",
                    5, values, err, errlen)))
        return VC_ERR_UNAVAILABLE;
    PQclear(res);
    return 0;
}
