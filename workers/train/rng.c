/* rng.c - helpers over the splitmix64 generator in rng.h. */
#include "workers/train/rng.h"

#include <math.h>

uint64_t train_rng_below(train_rng *r, uint64_t n)
{
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    for (;;) {
        uint64_t x = train_rng_next(r);
        if (x < limit) return x % n;
    }
}

float train_rng_normal(train_rng *r)
{
    double u1 = ((double)(train_rng_next(r) >> 11) + 1.0) * (1.0 / 9007199254740993.0); /* (0, 1] */
    double u2 = (double)(train_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

uint64_t train_rng_mix(uint64_t seed, uint64_t a, uint64_t b)
{
    train_rng r = {seed ^ 0x6a09e667f3bcc909ULL};
    r.s ^= train_rng_next(&r) + a * 0xd1b54a32d192ed03ULL;
    r.s ^= train_rng_next(&r) + b * 0x8cb92ba72f3d8dd7ULL;
    return train_rng_next(&r);
}
