/*
 * One-time code campaigns, the pure part (proto/campaigns.md): the alphabets,
 * what makes a campaign possible, drawing codes with rejection sampling, the
 * check symbol, and the stored, display and input forms of a code. No I/O:
 * randomness comes from a source the caller passes (vc_random_fill() in
 * production, a fixed sequence in tests).
 */
#ifndef VC_CAMPAIGN_H
#define VC_CAMPAIGN_H

#include <stddef.h>
#include <stdint.h>

#include "vc_event.h"

#define VC_CAMPAIGN_MAX_COUNT 10000000 /* codes in one campaign, at most */
#define VC_CAMPAIGN_LENGTH_MIN 6
#define VC_CAMPAIGN_LENGTH_MAX 24
#define VC_CAMPAIGN_LENGTH_DEFAULT 12
#define VC_CAMPAIGN_PREFIX_MAX 8
#define VC_CAMPAIGN_NAME_MAX 200 /* characters (code points), not bytes */
/* One guess may hit one of a campaign's codes with a chance of at most 1 / this. */
#define VC_CAMPAIGN_GUESS_MARGIN 1e9
/* The display form: prefix, '-', then groups of 4 joined by '-'. */
#define VC_CAMPAIGN_DISPLAY_MAX (VC_CODE_MAX + VC_CODE_MAX / 4 + 2)

typedef struct {
    const char *name;    /* "safe32", "digits" */
    const char *symbols; /* size symbols, in the order of their values */
    unsigned size;
} vc_alphabet_t;

/* The alphabet called name, or NULL when there is none. */
const vc_alphabet_t *vc_alphabet_find(const char *name);

/* What a campaign is: its codes and its rules. */
typedef struct {
    char name[VC_CAMPAIGN_NAME_MAX * 4 + 1]; /* characters of up to 4 bytes each */
    const vc_alphabet_t *alphabet; /* borrowed: one of vc_alphabet_find()'s */
    char prefix[VC_CAMPAIGN_PREFIX_MAX + 1];
    int length;       /* symbols after the prefix, check symbol included */
    int check_symbol; /* 1: the last symbol is the Luhn mod N check */
    int64_t count;
    int64_t discount_amount;     /* fixed discount, minor units; 0 when percent */
    int discount_percent;        /* 1..100, or 0 */
    int64_t max_discount_amount; /* cap on a percent discount; 0: none */
    int64_t min_order_amount;
    int64_t per_customer_limit; /* uses a customer may hold across the campaign */
    int64_t starts_at_ms;
    int64_t ends_at_ms;
} vc_campaign_spec_t;

/*
 * Checks that spec describes a campaign that can be made: a name, a count in
 * 1..VC_CAMPAIGN_MAX_COUNT, a known alphabet, a prefix of that alphabet, a
 * length in range and long enough for the count (alphabet^random symbols >=
 * count * VC_CAMPAIGN_GUESS_MARGIN), prefix + length <= VC_CODE_MAX, one
 * discount, a window. Returns 0, or VC_ERR_INVALID with err saying what is
 * wrong and what would do. Pure.
 */
int vc_campaign_spec_check(const vc_campaign_spec_t *spec, char *err, size_t errlen);

/* The fewest symbols after the prefix that count codes of spec's alphabet need. Pure. */
int vc_campaign_min_length(const vc_alphabet_t *alphabet, int check_symbol, int64_t count);

/*
 * Fills buf with len random bytes. Returns 0, or a negative VC_ERR_*. The
 * production source is vc_random_fill() (getrandom(2)).
 */
typedef int (*vc_random_fn)(void *arg, unsigned char *buf, size_t len);

#define VC_CODEGEN_POOL 16384

/* A code generator: one spec, one random source, a pool of random bytes. */
typedef struct {
    const vc_campaign_spec_t *spec; /* borrowed for the generator's life */
    vc_random_fn random;
    void *random_arg;
    unsigned limit; /* bytes >= limit are rejected: 256 - 256 % size */
    size_t pos, len;
    uint64_t rejected; /* bytes dropped by the rejection, for tests */
    unsigned char pool[VC_CODEGEN_POOL];
} vc_codegen_t;

/* Prepares g for spec (borrowed) and the source random(random_arg, ...). */
void vc_codegen_init(vc_codegen_t *g, const vc_campaign_spec_t *spec, vc_random_fn random,
                     void *random_arg);

/*
 * Draws one code in stored form into out (NUL-terminated): the prefix, the
 * random symbols (each byte b of the source gives symbols[b % size] when
 * b < limit and is dropped otherwise, so every symbol has probability
 * exactly 1/size), then the check symbol if the spec asks for one. Returns
 * its length, or a negative VC_ERR_* from the source.
 */
int vc_codegen_next(vc_codegen_t *g, char out[VC_CODE_MAX + 1]);

/* The Luhn mod N check symbol of s (len symbols of a), or 0 when s has another symbol. Pure. */
char vc_campaign_check_symbol(const vc_alphabet_t *a, const char *s, size_t len);

/*
 * Whether code (stored form, len bytes) can be one of spec's codes: prefix,
 * length, alphabet and check symbol. Says nothing about whether it exists.
 */
int vc_campaign_code_plausible(const vc_campaign_spec_t *spec, const char *code, size_t len);

/*
 * The stored form of what a customer typed (len bytes): ASCII letters upper-
 * cased, '-' and ' ' dropped. Returns its length, or -1 when a byte is
 * anything else or the result is empty or longer than VC_CODE_MAX.
 */
int vc_campaign_normalize(const char *in, size_t len, char out[VC_CODE_MAX + 1]);

/*
 * The advisory lock (pg_advisory_xact_lock(hashtext(...))) held by whoever
 * checks a code against the other kind: a voucher's creation against the
 * campaigns' codes (gateway/gw_admin.c), a generation's batch against the
 * vouchers (vc_campaign_pg.c). Held to the commit, so both cannot pass.
 */
#define VC_CAMPAIGN_CODE_LOCK "voucher-campaign-code"

/*
 * The display form of code (stored form): the first prefix_len symbols, '-',
 * then the rest in groups of 4 joined by '-' (no prefix: the groups only).
 * Returns its length, or 0 when it does not fit in cap bytes.
 */
size_t vc_campaign_display(const char *code, size_t prefix_len, char *out, size_t cap);

#endif
