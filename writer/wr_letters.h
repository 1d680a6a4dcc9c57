/*
 * The register of dead letters in PostgreSQL (deploy/sql/009: dead_letter,
 * dead_letter_action), as the `dlt` commands use it: a letter's state, the
 * operator's replays and discards, and the audit of each. The writer daemon
 * parks letters through wr_pg_park(); this file serves the commands only.
 * The only other writer file that speaks libpq. Blocking.
 */
#ifndef WR_LETTERS_H
#define WR_LETTERS_H

#include <stddef.h>
#include <stdint.h>

typedef struct wr_letters wr_letters_t;

/* One letter as the register has it. */
typedef struct {
    int64_t id;
    char state[16];          /* parked, replayed, discarded, superseded */
    char code[40];
    char order_id[72];
    char event_type[32];
    char dlt_at[160];        /* "TOPIC/P/O" of the recorded copy; "" when none was stored */
    int32_t dlt_partition;   /* -1 when none */
    int64_t dlt_offset;
    char replay_sent_at[40]; /* RFC 3339, "" when never sent */
    char replay_claimed_at[40]; /* when a replay claimed it (RFC 3339), "" when none did */
    char replay_claim[128];     /* which replay claimed it ("operator@host:pid"), or "" */
    char settled_at[40];     /* when it left parked, "" while parked */
} wr_letter_t;

/* Connects to dsn. Returns 0 or VC_ERR_UNAVAILABLE with err set; the caller owns *out. */
int wr_letters_open(wr_letters_t **out, const char *dsn, char *err, size_t errlen);
void wr_letters_close(wr_letters_t *l);

/*
 * Finds the letter of the event read at topic/partition/offset. Returns 1
 * (found, *out set), 0 (not recorded), or a negative error with err set.
 */
int wr_letters_find(wr_letters_t *l, const char *topic, int32_t partition, int64_t offset,
                    wr_letter_t *out, char *err, size_t errlen);

/*
 * Finds the letters of order_id (state = NULL: any state), oldest first, up
 * to cap of them into out. Returns how many, or a negative error.
 */
int wr_letters_of_order(wr_letters_t *l, const char *order_id, wr_letter_t *out, size_t cap,
                        char *err, size_t errlen);

/* Reads letter id as it is now into out. Returns 0, or a negative error with err set. */
int wr_letters_get(wr_letters_t *l, int64_t id, wr_letter_t *out, char *err, size_t errlen);

/* Finds the letter stored at dlt_topic/partition/offset. Returns as wr_letters_find(). */
int wr_letters_at(wr_letters_t *l, const char *dlt_topic, int32_t partition, int64_t offset,
                  wr_letter_t *out, char *err, size_t errlen);

/*
 * Records a letter found in the topic and not in the register (one written
 * before migration 009, or whose row a crash lost): as the writer would have
 * parked it. The strings are borrowed. Returns 0 with *out set, or a
 * negative error.
 */
typedef struct {
    const char *code, *order_id, *event_type;
    const char *dlt_topic;
    int32_t dlt_partition;
    int64_t dlt_offset;
    const char *topic;
    int32_t partition;
    int64_t offset;
    const char *error_class, *error_message;
} wr_letter_new_t;
int wr_letters_park(wr_letters_t *l, const wr_letter_new_t *n, wr_letter_t *out, char *err,
                    size_t errlen);

/*
 * How long a replay's claim on a letter holds: longer than the replay waits
 * for Kafka to acknowledge what it sent (wr_replayer_close()). An older claim
 * is that of a replay that died between its claim and its record: another
 * replay may take the letter over, and a discard may discard it.
 */
#define WR_REPLAY_CLAIM_TTL_S 900

/*
 * Claims letter id for the replay named claim, before anything is sent: one
 * conditional UPDATE that only one caller wins, for a letter parked, never
 * sent for replay, and without a live claim (WR_REPLAY_CLAIM_TTL_S) of
 * another replay. Returns 1 claimed, 0 not (*out is then the letter as it
 * is now, saying why: sent, claimed, or no longer parked), or a negative
 * error with err set.
 */
int wr_letters_replay_claim(wr_letters_t *l, int64_t id, const char *claim, wr_letter_t *out,
                            char *err, size_t errlen);

/*
 * Gives back the claim of a replay that did not send letter id after all
 * (Kafka did not acknowledge it): another replay may take it at once. Only
 * the claim named claim, on a letter not recorded as sent. Returns 0 or a
 * negative error.
 */
int wr_letters_replay_unclaim(wr_letters_t *l, int64_t id, const char *claim, char *err,
                              size_t errlen);

/*
 * Records that `dlt replay` put letter id back on the main topic (its
 * replay_sent_at), with the audit row, in one transaction. The letter stays
 * parked until the writer applies the event (wr_apply_batch() marks it
 * replayed). Returns 0 or a negative error.
 */
int wr_letters_replay_sent(wr_letters_t *l, int64_t id, const char *operator_name, char *err,
                           size_t errlen);

/*
 * Discards letter id if it is parked, was never sent for replay and no
 * replay holds a live claim on it (the replayed event may apply any moment:
 * the order would then be counted in PostgreSQL and released in Redis), with
 * the audit row, in one
 * transaction. Sets *changed to 1 when it was parked (now discarded), else
 * 0 (its state is unchanged; an audit row records the no-op). Returns 0 or
 * a negative error.
 */
int wr_letters_discard(wr_letters_t *l, int64_t id, const char *operator_name, int *changed,
                       char *err, size_t errlen);

/* Adds one audit row (action "replay" or "discard"). Returns 0 or a negative error. */
int wr_letters_audit(wr_letters_t *l, int64_t id, const char *action, const char *operator_name,
                     const char *outcome, const char *detail, char *err, size_t errlen);

#endif
