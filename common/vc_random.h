/*
 * The secure random source: getrandom(2), the kernel's CSPRNG. The one
 * adapter that touches it, so that the generator (vc_campaign.h) stays pure.
 */
#ifndef VC_RANDOM_H
#define VC_RANDOM_H

#include <stddef.h>

/*
 * Fills buf with len random bytes from getrandom(2) (blocking until the
 * kernel's pool is initialised, never GRND_NONBLOCK), retrying short reads
 * and EINTR. arg is unused (a vc_random_fn). Returns 0, or VC_ERR_IO.
 */
int vc_random_fill(void *arg, unsigned char *buf, size_t len);

#endif
