/* partition.h - non-IID splits of a labelled dataset across federated sites,
 * for tests and benchmarks: label skew drawn from a Dirichlet distribution.
 *
 * For every class, proportions p ~ Dirichlet(alpha, ..., alpha) over the sites
 * (from the seed) split that class's samples (in a seeded order); small alpha
 * gives each site few classes, large alpha approaches an even, IID split.
 * Every sample goes to exactly one site.  Pure. */
#ifndef GANTRY_FED_PARTITION_H
#define GANTRY_FED_PARTITION_H

#include <stddef.h>
#include <stdint.h>

/* site[i] in [0, sites) for each of the n samples; 0, or -1 (bad arguments) */
int fed_partition_dirichlet(const int32_t *labels, size_t n, int classes, int sites, double alpha, uint64_t seed, int *site);

#endif
