/*
 * The PostgreSQL adapter's classification (common/vc_pg.h): which errors are
 * transient, which are the data's, and which SQLSTATE the callers answer in
 * their own words. Pure: no server runs; libpq's empty results stand in for
 * failed ones where a result is needed.
 */
#include <check.h>
#include <string.h>

#include "ck_run.h"
#include "vc_error.h"
#include "vc_pg.h"

static const struct {
    const char *state;
    vc_pg_kind_t kind;
    int data;  /* vc_pg_kind_is_data() */
    int class; /* vc_pg_error_class() on a healthy connection */
} kinds[] = {
    {"08006", VC_PG_TRANSIENT, 0, VC_ERR_UNAVAILABLE},   /* connection failure */
    {"40001", VC_PG_TRANSIENT, 0, VC_ERR_UNAVAILABLE},   /* serialization failure */
    {"40P01", VC_PG_TRANSIENT, 0, VC_ERR_UNAVAILABLE},   /* deadlock detected */
    {"53300", VC_PG_TRANSIENT, 0, VC_ERR_UNAVAILABLE},   /* too many connections */
    {"57P01", VC_PG_TRANSIENT, 0, VC_ERR_UNAVAILABLE},   /* admin shutdown */
    {"57014", VC_PG_TRANSIENT, 0, VC_ERR_UNAVAILABLE},   /* statement timeout */
    {"58030", VC_PG_TRANSIENT, 0, VC_ERR_UNAVAILABLE},   /* io error */
    {"XX000", VC_PG_TRANSIENT, 0, VC_ERR_UNAVAILABLE},   /* internal error */
    {"XX001", VC_PG_PERMANENT, 0, VC_ERR_INVALID},       /* data corrupted: not XX000 */
    {"22003", VC_PG_DATA, 1, VC_ERR_INVALID},            /* numeric value out of range */
    {"22P02", VC_PG_DATA, 1, VC_ERR_INVALID},            /* invalid text representation */
    {"23505", VC_PG_UNIQUE, 1, VC_ERR_INVALID},          /* unique violation */
    {"23514", VC_PG_CHECK, 1, VC_ERR_INVALID},           /* check violation */
    {"23503", VC_PG_FOREIGN_KEY, 1, VC_ERR_INVALID},     /* foreign key violation */
    {"23502", VC_PG_INTEGRITY, 1, VC_ERR_INVALID},       /* not null violation */
    {"23P01", VC_PG_INTEGRITY, 1, VC_ERR_INVALID},       /* exclusion violation */
    {"42703", VC_PG_PERMANENT, 0, VC_ERR_INVALID},       /* undefined column */
    {"42501", VC_PG_PERMANENT, 0, VC_ERR_INVALID},       /* insufficient privilege */
    {"P0001", VC_PG_PERMANENT, 0, VC_ERR_INVALID},       /* raise exception */
    /* A text that begins with a SQLSTATE, as vc_pg_error_text() writes it. */
    {"23505: ERROR:  duplicate key value", VC_PG_UNIQUE, 1, VC_ERR_INVALID},
    {"40001: could not serialize access", VC_PG_TRANSIENT, 0, VC_ERR_UNAVAILABLE},
    /* No SQLSTATE at its start: nothing says it passes, or that the data caused it. */
    {"no connection", VC_PG_PERMANENT, 0, VC_ERR_INVALID},
    {"", VC_PG_PERMANENT, 0, VC_ERR_INVALID},
    {"2", VC_PG_PERMANENT, 0, VC_ERR_INVALID},
};

START_TEST(each_sqlstate_has_its_kind)
{
    vc_pg_kind_t kind = vc_pg_state_kind(kinds[_i].state);

    ck_assert_msg(kind == kinds[_i].kind, "%s: kind %d, want %d", kinds[_i].state, kind,
                  kinds[_i].kind);
    ck_assert_msg(vc_pg_kind_is_data(kind) == kinds[_i].data, "%s: is_data", kinds[_i].state);
    ck_assert_msg((kind == VC_PG_TRANSIENT ? VC_ERR_UNAVAILABLE : VC_ERR_INVALID) ==
                      kinds[_i].class,
                  "%s: class", kinds[_i].state);
}
END_TEST

START_TEST(no_state_is_permanent_without_a_result)
{
    ck_assert_int_eq(vc_pg_state_kind(NULL), VC_PG_PERMANENT);
}
END_TEST

/* A lost connection, or a failed result without a SQLSTATE, may pass when tried again. */
START_TEST(a_lost_connection_is_transient)
{
    PGresult *empty = PQmakeEmptyPGresult(NULL, PGRES_FATAL_ERROR);
    char text[128];

    ck_assert_ptr_nonnull(empty);
    ck_assert_int_eq(vc_pg_kind(NULL, NULL), VC_PG_TRANSIENT);
    ck_assert_int_eq(vc_pg_kind(NULL, empty), VC_PG_TRANSIENT);
    ck_assert_int_eq(vc_pg_error_class(NULL, NULL), VC_ERR_UNAVAILABLE);
    ck_assert_int_eq(vc_pg_error_class(NULL, empty), VC_ERR_UNAVAILABLE);
    ck_assert(!vc_pg_kind_is_data(vc_pg_kind(NULL, empty)));
    /* No constraint to name, and never NULL. */
    ck_assert_str_eq(vc_pg_constraint(NULL), "");
    ck_assert_str_eq(vc_pg_constraint(empty), "");
    /* With no SQLSTATE and no message, the short text is the long one. */
    vc_pg_error_primary(NULL, empty, text, sizeof(text));
    ck_assert_str_eq(text, "no connection");
    PQclear(empty);
}
END_TEST

static Suite *pg_suite(void)
{
    Suite *s = suite_create("pg");
    TCase *tc = tcase_create("classification");

    tcase_add_loop_test(tc, each_sqlstate_has_its_kind, 0, (int)(sizeof(kinds) / sizeof(kinds[0])));
    tcase_add_test(tc, no_state_is_permanent_without_a_result);
    tcase_add_test(tc, a_lost_connection_is_transient);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return ck_run_suite(pg_suite());
}
