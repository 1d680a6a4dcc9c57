/* The Redis Lua scripts, embedded at build time from common/lua/. */
#ifndef VC_LUA_H
#define VC_LUA_H

#include "vc_model.h"

/* A campaign's code (proto/campaigns.md): its own reserve, the others are the voucher's guarded. */
extern const char vc_lua_campaign_reserve[];
extern const char vc_lua_campaign_due[]; /* the reconciler's read of a campaign */
extern const char vc_lua_campaign_scan_finish[]; /* the finish of a campaign read in pieces */
extern const char vc_lua_campaign_rebuild[]; /* the reconciler's rebuild of lost keys */
extern const char vc_lua_campaign_rebuild_slice[];  /* a rebuild in slices: a slice of it */
extern const char vc_lua_campaign_rebuild_finish[]; /* ... and its last step */
extern const char vc_lua_campaign_release_begin[];
extern const char vc_lua_campaign_confirm[];
extern const char vc_lua_campaign_forget[];
extern const char vc_lua_campaign_release_finish[];

extern const char vc_lua_reserve[];
extern const char vc_lua_forget[];
extern const char vc_lua_confirm[];
extern const char vc_lua_release_begin[];
extern const char vc_lua_release_finish[];
extern const char vc_lua_restore[];
extern const char vc_lua_restore_stage[]; /* a restore in steps: a slice of it */
extern const char vc_lua_restore_swap[];  /* ... and its last step */
extern const char vc_lua_rebuild_swap[];  /* a rebuild in steps' last step */
extern const char vc_lua_restore_slice[];  /* a restore in slices: a slice of it */
extern const char vc_lua_restore_finish[]; /* ... and its last step */
extern const char vc_lua_retake_slice[];   /* a retake in slices: a slice of it */
extern const char vc_lua_retake_finish[];  /* ... and its last step */
extern const char vc_lua_lower_slice[];    /* a lower in slices: a slice of it */
extern const char vc_lua_lower_finish[];   /* ... and its last step */
extern const char vc_lua_rebuild[];
extern const char vc_lua_lower[];
extern const char vc_lua_retake[];
extern const char vc_lua_claim[];
extern const char vc_lua_repair_confirmed[];
extern const char vc_lua_load[];
extern const char vc_lua_limit[];
extern const char vc_lua_limit_sync[];
extern const char vc_lua_guard_bucket[]; /* gateway/gw_guard.h */
extern const char vc_lua_guard_index[];  /* gateway/gw_guard.h, the spent set */
extern const char vc_lua_admin_login[];  /* gateway/gw_login.h */
extern const char vc_lua_fence[]; /* the restart fence: gw_redis.c, reconciler/rc_fence.c */
/* fence.lua's key is VC_KEY_FENCE, and its leader key VC_KEY_FENCE_LEADER (vc_model.h). */
/* The reconciler's read of a large orders hash in pieces: reconciler/rc_redis.c. */
extern const char vc_lua_scan_begin[];
extern const char vc_lua_scan_finish[];

/*
 * The reconciler's fencing (proto/redis-keys.md, "Leadership and fencing"):
 * leader.lua alone (the text every rc_ script starts with), the mark, and
 * each script the reconciler writes with, leader.lua put first.
 */
extern const char vc_lua_leader[];
extern const char vc_lua_leader_mark[];
extern const char vc_lua_rc_restore[];
extern const char vc_lua_rc_retake[];
extern const char vc_lua_rc_lower[];
extern const char vc_lua_rc_rebuild[];
extern const char vc_lua_rc_release_begin[];
extern const char vc_lua_rc_release_finish[];
extern const char vc_lua_rc_repair_confirmed[];
extern const char vc_lua_rc_restore_stage[];
extern const char vc_lua_rc_restore_swap[];
extern const char vc_lua_rc_rebuild_swap[];
extern const char vc_lua_rc_restore_slice[];
extern const char vc_lua_rc_restore_finish[];
extern const char vc_lua_rc_retake_slice[];
extern const char vc_lua_rc_retake_finish[];
extern const char vc_lua_rc_lower_slice[];
extern const char vc_lua_rc_lower_finish[];
extern const char vc_lua_rc_limit_sync[];
extern const char vc_lua_rc_fence[];
extern const char vc_lua_rc_campaign_rebuild[];
extern const char vc_lua_rc_campaign_rebuild_slice[];
extern const char vc_lua_rc_campaign_rebuild_finish[];
extern const char vc_lua_rc_campaign_release_begin[];
extern const char vc_lua_rc_campaign_release_finish[];

#endif
