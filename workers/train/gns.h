/* gns.h - the gradient noise scale (McCandlish et al., "An Empirical Model of
 * Large-Batch Training", appendix A), estimated for free in data parallelism.
 *
 * With gradients averaged over a small batch (one rank's slice, b samples) and
 * a big one (the all-reduced global batch, B samples):
 *
 *   |G|^2 ~ (B |g_B|^2 - b |g_b|^2) / (B - b)
 *   S     ~ (|g_b|^2 - |g_B|^2) / (1/b - 1/B)       (S = tr Sigma, per-sample)
 *   B_noise = S / |G|^2
 *
 * Each estimate is unbiased but noisy, so the two are smoothed separately
 * (exponential moving averages) and divided at the end.  Pure: no I/O. */
#ifndef GANTRY_TRAIN_GNS_H
#define GANTRY_TRAIN_GNS_H

typedef struct {
    double alpha; /* weight of a new sample in the moving averages */
    double g2, s; /* smoothed |G|^2 and S */
    long n;       /* updates so far */
} train_gns;

void train_gns_init(train_gns *g, double alpha);
/* one step: small_sq = |g_b|^2 (the mean over ranks of each slice's), big_sq = |g_B|^2; b < B */
void train_gns_update(train_gns *g, double small_sq, double b, double big_sq, double B);
/* B_noise, or 0 before the first update (or while |G|^2 is not positive) */
double train_gns_value(const train_gns *g);

#endif
