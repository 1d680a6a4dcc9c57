/*
 * Fault-injection points for tests. Built only with -Dfault_points=true
 * (tests/run does; releases never do). Without the option a point compiles
 * to nothing.
 *
 * VC_FAULT("name") kills the process with SIGKILL, as `kill -9` would, when
 * VOUCHER_FAULT names that point.
 *
 * VC_PAUSE("name") stops the calling thread at that point when VOUCHER_PAUSE
 * names it: the process creates the file VOUCHER_PAUSE_DIR/name (holding its
 * pid) and waits until a test removes it, so that the test can act inside a
 * window between two steps deterministically (wait for the file, act, remove
 * it). VOUCHER_PAUSE may list several points separated by commas. A point
 * pauses every time it is reached; a missing VOUCHER_PAUSE_DIR, or a file
 * that cannot be created, is logged and the point does not pause.
 *
 * VC_PAUSE_NOTE("name", note) pauses the same, and writes note (a string, may
 * be NULL) on the file's second line: what the process is about to do there,
 * so that a test can let it go until it is about to do what the test waits for.
 * VC_PAUSE_WITH("name", note, detail) also writes the text detail after that
 * line (the reconciler's each-repair point: the script it is about to send,
 * which tests/model names). The file is written aside and renamed into place,
 * so a test that sees it sees all of it.
 */
#ifndef VC_FAULT_H
#define VC_FAULT_H

#ifdef VC_FAULT_POINTS
void vc_fault(const char *name);
void vc_pause(const char *name, const char *note, const char *detail);
#define VC_FAULT(name) vc_fault(name)
#define VC_PAUSE(name) vc_pause(name, NULL, NULL)
#define VC_PAUSE_NOTE(name, note) vc_pause(name, note, NULL)
#define VC_PAUSE_WITH(name, note, detail) vc_pause(name, note, detail)
#else
#define VC_FAULT(name) ((void)0)
#define VC_PAUSE(name) ((void)0)
#define VC_PAUSE_NOTE(name, note) ((void)(note))
#define VC_PAUSE_WITH(name, note, detail) ((void)(note), (void)(detail))
#endif

#endif
