/* rng.c - helpers over the splitmix64 generator in rng.h. */
#include "common/rng.h"

#include <math.h>

uint64_t rng_below(rng_state *r, uint64_t n)
{
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    for (;;) {
        uint64_t x = rng_next(r);
        if (x < limit) return x % n;
    }
}

float rng_normal(rng_state *r)
{
    double u1 = ((double)(rng_next(r) >> 11) + 1.0) * (1.0 / 9007199254740993.0); /* (0, 1] */
    double u2 = (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

uint64_t rng_mix(uint64_t seed, uint64_t a, uint64_t b)
{
    rng_state r = {seed ^ 0x6a09e667f3bcc909ULL};
    r.s ^= rng_next(&r) + a * 0xd1b54a32d192ed03ULL;
    r.s ^= rng_next(&r) + b * 0x8cb92ba72f3d8dd7ULL;
    return rng_next(&r);
}
