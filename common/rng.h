/* rng.h - the PRNG of training, model selection and the federated designs: splitmix64.
 *
 * One 64-bit state, so it is trivially saved in a checkpoint and the same
 * seed gives the same numbers on every machine and backend (initialisation,
 * dropout masks and shuffles are all drawn here, on the host). */
#ifndef GANTRY_RNG_H
#define GANTRY_RNG_H

#include <stdint.h>

typedef struct {
    uint64_t s;
} rng_state;

static inline void rng_seed(rng_state *r, uint64_t seed)
{
    r->s = seed;
}

static inline uint64_t rng_next(rng_state *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* uniform in [0, 1), 24 bits */
static inline float rng_uniform(rng_state *r)
{
    return (float)(rng_next(r) >> 40) * (1.0f / 16777216.0f);
}

/* uniform integer in [0, n), n > 0 (rejection sampling, no modulo bias) */
uint64_t rng_below(rng_state *r, uint64_t n);

/* standard normal (Box-Muller) */
float rng_normal(rng_state *r);

/* a stream derived from (seed, a, b): independent enough for per-epoch shuffles */
uint64_t rng_mix(uint64_t seed, uint64_t a, uint64_t b);

#endif
