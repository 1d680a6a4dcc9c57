/*
 * The sold-out marks: which vouchers Redis last said were sold out, so that a
 * new order for one is answered OUT_OF_STOCK for a while without running
 * reserve.lua. The marks are kept for the whole process (every worker reads
 * and writes the same table), and a use given back on any worker clears the
 * mark of its code on all of them.
 *
 * The table has a fixed number of slots, chosen by a keyed hash of the code:
 * a code marked in a slot another code holds takes the slot over. That only
 * costs the other code a script run, never a wrong answer, and the key keeps
 * anyone from choosing codes that share a slot.
 */
#ifndef GW_SOLDOUT_H
#define GW_SOLDOUT_H

#include <stdint.h>

/* Remembers that code was sold out as of now, until mono_until_ms (vc_time_mono_ms()). */
void gw_soldout_mark(const char *code, int64_t mono_until_ms);

/*
 * Forgets the sold-out mark of code (a use came back) on every worker (any
 * thread): a mark is void once the clear count of its code's slot moved on.
 */
void gw_soldout_clear(const char *code);

/* Whether code is marked sold out at mono_now_ms (any thread). */
int gw_soldout_is(const char *code, int64_t mono_now_ms);

#endif
