#include "vc_campaign.h"

#include <stdio.h>
#include <string.h>

#include "vc_error.h"
#include "vc_utf8.h"

static const vc_alphabet_t alphabets[] = {
    /* A-Z and 2-9 without the look-alikes 0 O 1 I: 24 letters and 8 digits. */
    {"safe32", "23456789ABCDEFGHJKLMNPQRSTUVWXYZ", 32},
    {"digits", "0123456789", 10},
};

const vc_alphabet_t *vc_alphabet_find(const char *name)
{
    for (size_t i = 0; i < sizeof(alphabets) / sizeof(alphabets[0]); i++)
        if (name && strcmp(name, alphabets[i].name) == 0)
            return &alphabets[i];
    return NULL;
}

/* The value of symbol c in a, or -1. */
static int symbol_value(const vc_alphabet_t *a, char c)
{
    const char *p = c ? memchr(a->symbols, c, a->size) : NULL;
    return p ? (int)(p - a->symbols) : -1;
}

int vc_campaign_min_length(const vc_alphabet_t *alphabet, int check_symbol, int64_t count)
{
    /*
     * The smallest r with size^r >= count * margin, counted in doubles:
     * 32^24 = 2^120 is far inside their range, and a result one off at an
     * exact power would only move the boundary by one symbol's worth.
     */
    double need = (double)count * VC_CAMPAIGN_GUESS_MARGIN, have = 1;
    int r = 0;

    while (have < need) {
        have *= alphabet->size;
        r++;
    }
    r += check_symbol ? 1 : 0;
    return r < VC_CAMPAIGN_LENGTH_MIN ? VC_CAMPAIGN_LENGTH_MIN : r;
}

int vc_campaign_spec_check(const vc_campaign_spec_t *s, char *err, size_t errlen)
{
    size_t plen = strlen(s->prefix);
    int min;

    if (!s->name[0]) {
        snprintf(err, errlen, "field \"name\" must not be empty");
        return VC_ERR_INVALID;
    }
    if (s->count < 1 || s->count > VC_CAMPAIGN_MAX_COUNT) {
        snprintf(err, errlen, "field \"count\" must be within 1..%d", VC_CAMPAIGN_MAX_COUNT);
        return VC_ERR_INVALID;
    }
    if (!s->alphabet) {
        snprintf(err, errlen, "field \"alphabet\" must be \"safe32\" or \"digits\"");
        return VC_ERR_INVALID;
    }
    for (size_t i = 0; i < plen; i++)
        if (symbol_value(s->alphabet, s->prefix[i]) < 0) {
            /* The whole character is quoted, not its first byte: the detail stays UTF-8. */
            size_t n = vc_utf8_char(s->prefix + i, plen - i);

            snprintf(err, errlen,
                     "field \"prefix\" must be 1..%d symbols of the alphabet %s (%s); '%.*s' is "
                     "not one",
                     VC_CAMPAIGN_PREFIX_MAX, s->alphabet->name, s->alphabet->symbols,
                     (int)(n ? n : 1), s->prefix + i);
            return VC_ERR_INVALID;
        }
    if (s->length < VC_CAMPAIGN_LENGTH_MIN || s->length > VC_CAMPAIGN_LENGTH_MAX) {
        snprintf(err, errlen, "field \"length\" must be within %d..%d", VC_CAMPAIGN_LENGTH_MIN,
                 VC_CAMPAIGN_LENGTH_MAX);
        return VC_ERR_INVALID;
    }
    if (plen + (size_t)s->length > VC_CODE_MAX) {
        snprintf(err, errlen, "\"prefix\" and \"length\" together must be at most %d symbols",
                 VC_CODE_MAX);
        return VC_ERR_INVALID;
    }
    min = vc_campaign_min_length(s->alphabet, s->check_symbol, s->count);
    if (s->length < min) {
        snprintf(err, errlen,
                 "field \"length\" %d is too short for %lld codes: with the alphabet %s it must be "
                 "at least %d, so that one guess in %.0e or fewer hits a code",
                 s->length, (long long)s->count, s->alphabet->name, min,
                 VC_CAMPAIGN_GUESS_MARGIN);
        return VC_ERR_INVALID;
    }
    if ((s->discount_amount > 0) == (s->discount_percent > 0)) {
        snprintf(err, errlen,
                 "exactly one of the fields \"discountAmount\" and \"discountPercent\" is "
                 "required");
        return VC_ERR_INVALID;
    }
    if (s->discount_percent > 100 || s->discount_percent < 0 || s->discount_amount < 0 ||
        s->max_discount_amount < 0 || (s->max_discount_amount > 0 && s->discount_percent == 0)) {
        snprintf(err, errlen,
                 "\"discountPercent\" must be within 1..100, and \"maxDiscountAmount\" goes "
                 "with it only");
        return VC_ERR_INVALID;
    }
    if (s->min_order_amount < 0 || s->per_customer_limit < 1 || s->per_customer_limit > INT32_MAX) {
        snprintf(err, errlen,
                 "\"minOrderAmount\" must not be negative and \"perCustomerLimit\" must be "
                 "within 1..%d",
                 INT32_MAX);
        return VC_ERR_INVALID;
    }
    if (s->ends_at_ms <= s->starts_at_ms) {
        snprintf(err, errlen, "field \"endsAt\" must be after \"startsAt\"");
        return VC_ERR_INVALID;
    }
    return 0;
}

void vc_codegen_init(vc_codegen_t *g, const vc_campaign_spec_t *spec, vc_random_fn random,
                     void *random_arg)
{
    g->spec = spec;
    g->random = random;
    g->random_arg = random_arg;
    g->limit = 256 - 256 % spec->alphabet->size;
    g->pos = g->len = 0;
    g->rejected = 0;
}

int vc_codegen_next(vc_codegen_t *g, char out[VC_CODE_MAX + 1])
{
    const vc_alphabet_t *a = g->spec->alphabet;
    size_t plen = strlen(g->spec->prefix), n = plen;
    size_t end = plen + (size_t)g->spec->length - (g->spec->check_symbol ? 1 : 0);
    int rc;

    memcpy(out, g->spec->prefix, plen);
    while (n < end) {
        unsigned b;

        if (g->pos == g->len) {
            if ((rc = g->random(g->random_arg, g->pool, sizeof(g->pool))) != 0)
                return rc;
            g->pos = 0;
            g->len = sizeof(g->pool);
        }
        b = g->pool[g->pos++];
        /* Rejection: below limit, every residue mod size is equally likely. */
        if (b >= g->limit) {
            g->rejected++;
            continue;
        }
        out[n++] = a->symbols[b % a->size];
    }
    if (g->spec->check_symbol) {
        out[n] = vc_campaign_check_symbol(a, out, n);
        n++;
    }
    out[n] = '\0';
    return (int)n;
}

/* Luhn mod N's sum over s, the rightmost symbol doubled when double_last is set. */
static int luhn_sum(const vc_alphabet_t *a, const char *s, size_t len, int double_last)
{
    unsigned n = a->size, sum = 0;
    int twice = double_last;

    for (size_t i = len; i-- > 0; twice = !twice) {
        int v = symbol_value(a, s[i]);
        unsigned addend;

        if (v < 0)
            return -1;
        addend = (unsigned)v * (twice ? 2u : 1u);
        sum += addend / n + addend % n;
    }
    return (int)(sum % n);
}

char vc_campaign_check_symbol(const vc_alphabet_t *a, const char *s, size_t len)
{
    int sum = luhn_sum(a, s, len, 1);

    if (sum < 0)
        return 0;
    return a->symbols[(a->size - (unsigned)sum) % a->size];
}

int vc_campaign_code_plausible(const vc_campaign_spec_t *spec, const char *code, size_t len)
{
    size_t plen = strlen(spec->prefix);

    if (len != plen + (size_t)spec->length || memcmp(code, spec->prefix, plen) != 0)
        return 0;
    for (size_t i = plen; i < len; i++)
        if (symbol_value(spec->alphabet, code[i]) < 0)
            return 0;
    if (spec->check_symbol)
        return luhn_sum(spec->alphabet, code, len, 0) == 0;
    return 1;
}

int vc_campaign_normalize(const char *in, size_t len, char out[VC_CODE_MAX + 1])
{
    size_t n = 0;

    for (size_t i = 0; i < len; i++) {
        char c = in[i];

        if (c == '-' || c == ' ')
            continue;
        if (c >= 'a' && c <= 'z')
            c = (char)(c - 'a' + 'A');
        if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) || n == VC_CODE_MAX)
            return -1;
        out[n++] = c;
    }
    out[n] = '\0';
    return n ? (int)n : -1;
}

size_t vc_campaign_display(const char *code, size_t prefix_len, char *out, size_t cap)
{
    size_t len = strlen(code), n = 0;

    if (prefix_len > len)
        return 0;
    for (size_t i = 0; i < len; i++) {
        size_t k = i - prefix_len; /* position in the grouped part */

        if (i > 0 && (i == prefix_len || (i > prefix_len && k % 4 == 0))) {
            if (n + 1 >= cap)
                return 0;
            out[n++] = '-';
        }
        if (n + 1 >= cap)
            return 0;
        out[n++] = code[i];
    }
    if (n >= cap)
        return 0;
    out[n] = '\0';
    return n;
}
