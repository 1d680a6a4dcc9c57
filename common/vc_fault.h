/*
 * Fault-injection points for tests. Built only with -Dfault_points=true
 * (tests/run does; releases never do): VC_FAULT("name") kills the process
 * with SIGKILL, as `kill -9` would, when VOUCHER_FAULT names that point.
 * Without the option a point compiles to nothing.
 */
#ifndef VC_FAULT_H
#define VC_FAULT_H

#ifdef VC_FAULT_POINTS
void vc_fault(const char *name);
#define VC_FAULT(name) vc_fault(name)
#else
#define VC_FAULT(name) ((void)0)
#endif

#endif
