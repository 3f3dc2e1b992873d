/* ratelimit.h - a token bucket per API token: `rate` requests per second on
 * average, bursts up to `burst`.  Pure bookkeeping (the caller passes the time),
 * owned by the server's single event loop thread. */
#ifndef GANTRY_RATELIMIT_H
#define GANTRY_RATELIMIT_H

#include <stdint.h>

typedef struct ratelimit ratelimit;

/* rate <= 0 turns limiting off */
ratelimit *ratelimit_create(double rate, double burst);
/* 0 when the request may go on; else the seconds to wait before a retry (>= 1) */
int ratelimit_take(ratelimit *rl, const char *key, int64_t now_us);

#endif
