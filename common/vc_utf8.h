/*
 * UTF-8 as RFC 3629 defines it (no overlong forms, no surrogates, nothing
 * above U+10FFFF), for text that quotes a client's input: an error's detail
 * names the field or the symbol that was refused, and its answer must stay
 * valid UTF-8 JSON (issue 45: a prefix "Ä" was quoted as its first byte
 * alone). Pure, no allocation.
 */
#ifndef VC_UTF8_H
#define VC_UTF8_H

#include <stddef.h>

/* U+FFFD REPLACEMENT CHARACTER, which stands for a byte that is not UTF-8. */
#define VC_UTF8_REPLACEMENT "\xEF\xBF\xBD"

/*
 * The length (1..4) of the character that starts at s, whose n bytes (n > 0)
 * may be read; 0 when they do not start with a whole, valid character.
 */
size_t vc_utf8_char(const char *s, size_t n);

/*
 * 1 when the n bytes at s are whole, valid characters, 0 otherwise. yajl's
 * own check lets overlong forms (C0 80, C1 BB), surrogates and code points
 * past U+10FFFF through: a string it gives is checked again with this before
 * it is kept, or the JSON writer would change it (to U+FFFD) and PostgreSQL
 * would refuse it.
 */
int vc_utf8_valid(const char *s, size_t n);

/*
 * How many of the n bytes at s to keep so that a cut does not split a
 * character: n, or less when its last character is incomplete (the lead
 * byte and its continuation bytes that came before n are dropped). Bytes
 * that are not UTF-8 at all are kept: the JSON writer replaces them
 * (vc_jout_str()).
 */
size_t vc_utf8_cut(const char *s, size_t n);

/*
 * The bytes of the NUL-terminated s to quote when at most max may be:
 * strlen(s) when it fits, else max or fewer, cut at a character boundary
 * (vc_utf8_cut()). For "%.*s".
 */
int vc_utf8_quote_len(const char *s, size_t max);

/*
 * The characters (code points) of the NUL-terminated s, as PostgreSQL's
 * length() counts them, for limits given in characters: the bytes that do
 * not continue a character (all but 10xxxxxx). s is valid UTF-8 (a JSON
 * string as the parser gives it: vc_utf8_valid() checked it).
 */
size_t vc_utf8_count(const char *s);

#endif
