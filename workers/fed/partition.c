/* partition.c - Dirichlet label-skew splits (partition.h). */
#include "workers/fed/partition.h"
#include "common/alloc.h"

#include "common/rng.h"

#include <math.h>
#include <stdlib.h>

static double uniform01(rng_state *r) /* (0, 1) */
{
    return ((double)(rng_next(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

/* Gamma(shape, 1): Marsaglia and Tsang; shape < 1 through Gamma(shape + 1) U^(1/shape) */
static double gamma_draw(rng_state *r, double shape)
{
    if (shape < 1) return gamma_draw(r, shape + 1) * pow(uniform01(r), 1.0 / shape);
    double d = shape - 1.0 / 3, c = 1 / sqrt(9 * d);
    for (;;) {
        double x = rng_normal(r), v = 1 + c * x;
        if (v <= 0) continue;
        v = v * v * v;
        double u = uniform01(r);
        if (log(u) < 0.5 * x * x + d - d * v + d * log(v)) return d * v;
    }
}

int fed_partition_dirichlet(const int32_t *labels, size_t n, int classes, int sites, double alpha, uint64_t seed, int *site)
{
    if (sites < 1 || classes < 1 || !(alpha > 0)) return -1;
    size_t *idx = xmalloc(sizeof(size_t) * (n ? n : 1));
    double *p = xmalloc(sizeof(double) * (size_t)sites);
    rng_state r = {rng_mix(seed, 31, 0)};
    for (int c = 0; c < classes; c++) {
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (labels[i] == c) idx[m++] = i;
        for (size_t i = m; i > 1; i--) { /* a seeded order of the class's samples */
            size_t j = (size_t)rng_below(&r, i), t = idx[i - 1];
            idx[i - 1] = idx[j], idx[j] = t;
        }
        double tot = 0;
        for (int s = 0; s < sites; s++)
            tot += p[s] = gamma_draw(&r, alpha);
        double acc = 0;
        size_t from = 0;
        for (int s = 0; s < sites; s++) { /* cumulative cut points: every sample once */
            acc += p[s] / tot;
            size_t to = s == sites - 1 ? m : (size_t)llround(acc * (double)m);
            if (to > m) to = m;
            for (size_t i = from; i < to; i++)
                site[idx[i]] = s;
            if (to > from) from = to;
        }
    }
    for (size_t i = 0; i < n; i++) /* labels outside [0, classes) go round-robin */
        if (labels[i] < 0 || labels[i] >= classes) site[i] = (int)(i % (size_t)sites);
    free(idx), free(p);
    return 0;
}
