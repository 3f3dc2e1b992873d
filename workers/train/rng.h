/* rng.h - the training library's PRNG: splitmix64.
 *
 * One 64-bit state, so it is trivially saved in a checkpoint and the same
 * seed gives the same numbers on every machine and backend (initialisation,
 * dropout masks and shuffles are all drawn here, on the host). */
#ifndef GANTRY_TRAIN_RNG_H
#define GANTRY_TRAIN_RNG_H

#include <stdint.h>

typedef struct {
    uint64_t s;
} train_rng;

static inline void train_rng_seed(train_rng *r, uint64_t seed)
{
    r->s = seed;
}

static inline uint64_t train_rng_next(train_rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* uniform in [0, 1), 24 bits */
static inline float train_rng_uniform(train_rng *r)
{
    return (float)(train_rng_next(r) >> 40) * (1.0f / 16777216.0f);
}

/* uniform integer in [0, n), n > 0 (rejection sampling, no modulo bias) */
uint64_t train_rng_below(train_rng *r, uint64_t n);

/* standard normal (Box-Muller) */
float train_rng_normal(train_rng *r);

/* a stream derived from (seed, a, b): independent enough for per-epoch shuffles */
uint64_t train_rng_mix(uint64_t seed, uint64_t a, uint64_t b);

#endif
