/*
 * Campaigns in PostgreSQL (deploy/sql/013, proto/campaigns.md): creating one,
 * generating its codes with COPY in batches, reading its state and progress,
 * deactivating it, and reading its codes a page at a time. Blocking (libpq's
 * synchronous API): the gateway runs these on its threadpool, the CLI
 * directly. Shared by both so that there is one generator.
 */
#ifndef VC_CAMPAIGN_PG_H
#define VC_CAMPAIGN_PG_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

#include "vc_audit.h"
#include "vc_campaign.h"

/*
 * Domain outcomes of this module (positive, beside vc_error.h's VC_E_*, kept
 * here so that the shared list does not grow for one module's needs).
 */
#define VC_CAMPAIGN_E_PREFIX 40    /* the prefix overlaps another campaign's */
#define VC_CAMPAIGN_E_NOT_FOUND 41 /* no campaign with that id */
#define VC_CAMPAIGN_E_BUSY 42      /* the campaign is still generating */

#define VC_CAMPAIGN_BATCH 50000 /* codes per COPY and per progress step */
/* A GENERATING campaign not updated for this long is shown as stalled. */
#define VC_CAMPAIGN_STALLED_S 60

/* A campaign as stored. */
typedef struct {
    int64_t id;
    vc_campaign_spec_t spec;
    char state[16]; /* GENERATING, ACTIVE, INACTIVE, FAILED */
    int64_t generated;
    int64_t used_count;
    int stalled; /* GENERATING and not updated for VC_CAMPAIGN_STALLED_S */
    /* Set by vc_campaign_load_usage() only (has_usage 1): its codes by use. */
    int has_usage;
    int64_t held;     /* codes of a RESERVED order in campaign_redemption */
    int64_t redeemed; /* codes of a CONFIRMED order */
    int64_t free;     /* generated codes with no live order: generated - held - redeemed */
} vc_campaign_row_t;

/*
 * Inserts a campaign in state GENERATING from spec (checked by the caller
 * with vc_campaign_spec_check()), in one transaction that first takes an
 * advisory lock and refuses a prefix equal to, starting, or started by
 * another campaign's. Returns 0 with *id set, VC_CAMPAIGN_E_PREFIX (err names
 * the other campaign), or a negative VC_ERR_* with err set. Nothing is
 * written unless it returns 0; the campaign's admin_audit row by who
 * (campaign.create, its count) is committed with it.
 */
int vc_campaign_create(PGconn *conn, const vc_campaign_spec_t *spec, const vc_audit_who_t *who,
                       int64_t *id, char *err, size_t errlen);

/*
 * Reports progress after each committed batch; returns nonzero to stop
 * (the campaign then stays GENERATING, resumable).
 */
typedef int (*vc_campaign_progress_cb)(void *arg, int64_t generated, int64_t total);

/*
 * Writes the codes of campaign id until it has total_count of them: the
 * codes bound to customers (customers, n of them, borrowed; their codes are
 * written first, and are taken as written once generated_count reaches n),
 * then unbound ones. Batches of VC_CAMPAIGN_BATCH, each one COPY and one
 * UPDATE of generated_count in its own transaction; a batch refused by the
 * unique key is drawn again (at most 10 times in a row). random is the
 * source (vc_random_fill in production). Memory: one batch's COPY text,
 * about 4 MiB at most. Ends with state ACTIVE (unless deactivated
 * meanwhile). On a failure the campaign is marked FAILED (resumable) and a
 * negative VC_ERR_* returned with err set; VC_CAMPAIGN_E_NOT_FOUND when id
 * is no campaign; VC_CAMPAIGN_E_BUSY when it is not GENERATING or FAILED, or
 * another session generates it (a session advisory lock per campaign).
 */
int vc_campaign_generate(PGconn *conn, int64_t id, const int64_t *customers, size_t n,
                         vc_random_fn random, vc_campaign_progress_cb progress, void *arg,
                         char *err, size_t errlen);

/* Reads campaign id. Returns 0, VC_CAMPAIGN_E_NOT_FOUND, or a negative VC_ERR_* with err. */
int vc_campaign_load(PGconn *conn, int64_t id, vc_campaign_row_t *out, char *err, size_t errlen);

/*
 * Up to cap campaigns, newest first (by id), after the campaign after (0:
 * from the newest on; else those with a smaller id), into out: state -1 any,
 * 1 only ACTIVE ones, 0 only the others. Returns how many, or a negative
 * VC_ERR_* with err set.
 */
int vc_campaign_list(PGconn *conn, int64_t after, int state, vc_campaign_row_t *out, int cap,
                     char *err, size_t errlen);

/*
 * Counts campaign id's codes by use, as PostgreSQL has them (the writer's
 * campaign_redemption: the truth, behind Redis by the events in flight), into
 * out->held, redeemed and free (out->generated must be loaded; has_usage set).
 * One scan of the campaign's redemptions: for an admin's look, not a hot
 * path. Returns 0, or a negative VC_ERR_* with err set.
 */
int vc_campaign_load_usage(PGconn *conn, int64_t id, vc_campaign_row_t *out, char *err,
                           size_t errlen);

/*
 * Sets campaign id INACTIVE (final; again is fine) and reads it into out,
 * with its admin_audit row by who (campaign.deactivate, the row before and
 * after) in the same transaction. Returns 0, VC_CAMPAIGN_E_NOT_FOUND, or a
 * negative VC_ERR_* with err; nothing is written unless it returns 0.
 */
int vc_campaign_deactivate(PGconn *conn, int64_t id, const vc_audit_who_t *who,
                           vc_campaign_row_t *out, char *err, size_t errlen);

/*
 * Appends to buf (cap bytes) the CSV lines "DISPLAY-CODE,customerId\n"
 * (customerId empty when unbound) of campaign id's codes after the one with
 * seq *after (0 for the first page), in the order they were drawn (bound
 * codes first), at most limit of them (limit * VC_CAMPAIGN_CSV_LINE_MAX
 * bytes always fit). Sets *len, and *after to the last seq written. Returns
 * the number of rows (0: no more), or a negative VC_ERR_* with err.
 */
#define VC_CAMPAIGN_CSV_LINE_MAX (VC_CAMPAIGN_DISPLAY_MAX + 1 + 20 + 1 + 24)
int vc_campaign_codes_page(PGconn *conn, int64_t id, size_t prefix_len, int64_t *after, int limit,
                           char *buf, size_t cap, size_t *len, char *err, size_t errlen);

#endif
