/*
 * The reconciler's pass over campaigns (proto/campaigns.md, "The
 * reconciler"): per campaign, numbers first (PostgreSQL's live rows, read
 * from its aggregates, Redis's taken codes, holds and releases); when they
 * settle it, its aggregates in Redis and PostgreSQL compared ("Aggregates",
 * rc_agg.h). When the numbers do not settle it, when the aggregates disagree,
 * or every full_every_ms (every audit_every_ms while its aggregates agree), a
 * full read of its rows and orders, judged with the voucher
 * model (rc_model.h) and repaired as a voucher is: lost taken or users hashes
 * rebuilt, holds expired, undelivered holds released, holds PostgreSQL
 * released given back, holds it confirmed confirmed, releases begun and never
 * finished published again and finished.
 */
#ifndef RC_CAMPAIGN_H
#define RC_CAMPAIGN_H

#include <stdint.h>

#include "rc_pass.h"
#include "rc_plan.h"

/* A campaign's numbers, as campaign_due.lua's first line gives them. */
typedef struct {
    long long holds, releasing, orders;
    int lost;    /* taken or users missing beside another of the campaign's keys */
    int present; /* 1 taken exists, + 2 users, + 4 orders */
} rc_campaign_numbers_t;

/*
 * Pure: parses campaign_due.lua's first line, "holds releasing orders lost keys"
 * (five integers of digits only, one space between them, each within its
 * range), into *n. Returns 0, or VC_ERR_PROTOCOL when the line is anything
 * else: a short or malformed answer is an error, never numbers that read as
 * "every key present, nothing lost".
 */
int rc_campaign_numbers_parse(const char *line, rc_campaign_numbers_t *n);

/* campaign_due.lua's text answer, parsed. */
typedef struct {
    rc_campaign_numbers_t numbers;
    int due; /* the holds it listed as due (past heldUntil and the grace) */
} rc_campaign_due_t;

/*
 * Pure: parses campaign_due.lua's text answer: the numbers line
 * (rc_campaign_numbers_parse()), then one line "orderId heldUntilMs:state" per
 * due hold, at most max of them, '\n' between lines and none after the last;
 * heldUntilMs and the state are read by the one order-value parser
 * (vc_order_value.h). Returns 0 with *d filled, or VC_ERR_PROTOCOL (d
 * unspecified) for anything else: a line short, empty or malformed, more
 * lines than asked for. text is borrowed.
 */
int rc_campaign_due_parse(const char *text, int max, rc_campaign_due_t *d);

/*
 * Pure: whether the numbers of a campaign ask for a full read. lost is
 * campaign_due.lua's (taken or users missing beside the other keys); taken
 * Redis's codes taken, live PostgreSQL's live rows, releasing the releases
 * begun, due the holds past heldUntil and the grace, flying the campaign's
 * events in flight. Otherwise the campaign is judged by its aggregates, or
 * read in full every full_every_ms only (every pass with --once).
 */
int rc_campaign_needs_full(int lost, int64_t taken, int64_t live, int64_t releasing, int64_t due,
                           size_t flying);

/*
 * Judges every campaign that may hold uses (ACTIVE or INACTIVE) and, with
 * repair, repairs it (at most a batch of expiries per campaign a pass). vs
 * holds the campaigns' events in flight read by the pass. Returns 0 or a
 * negative error with err set.
 */
int rc_campaign_pass(rc_ctx_t *ctx, const rc_vouchers_t *vs, int repair, int64_t snapshot_ms,
                     rc_summary_t *sum, char *err, size_t errlen);

#endif
