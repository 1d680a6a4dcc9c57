/*
 * The writer's names for what applying an event did, as wr_apply_events()
 * returns it per event. The state machine itself, and these values, are
 * common/vc_redemption.h's: the one table the reconciler replays with and the
 * SQL is tested against (tests/integration/test_redemption_oracle.sh).
 */
#ifndef WR_STATE_H
#define WR_STATE_H

#include "vc_redemption.h"

#define WR_OUT_PENDING VC_RD_OUT_PENDING
#define WR_OUT_APPLIED VC_RD_OUT_APPLIED
#define WR_OUT_NOOP VC_RD_OUT_NOOP
#define WR_OUT_EARLY VC_RD_OUT_EARLY
#define WR_OUT_TOMBSTONE VC_RD_OUT_TOMBSTONE
#define WR_OUT_CONFLICT VC_RD_OUT_CONFLICT
#define WR_OUT_POISON VC_RD_OUT_POISON
#define WR_OUT_MISMATCH VC_RD_OUT_MISMATCH

#endif
