/* faro_exact.h - the exact optimum of Faro's objectives over integer replica counts, pure.
 *
 * The greedy step of faro.c can stop short of the optimum; this one cannot, so
 * the simulator can tell what the optimisation costs (docs/autoscaler.md, "Where
 * the gap to the paper goes").  Sum is separable: a dynamic programme over jobs
 * and slots.  Fair and FairSum depend on the smallest and largest utility too:
 * for every pair (L, H) of utility levels some job can reach, the same
 * programme finds the largest Σ U with every job's utility in [L, H]; the
 * optimum is the best of these (its own min and max are one of the pairs).
 * Pairs are visited from the largest L down and cut off by bounds (FairSum is
 * at most N·L; for a given L the bound Σ min(H, U_max) + N(L − H) falls with
 * H).  Eligible instances: integral slots per replica and the minimums within
 * the budget. */
#ifndef GANTRY_AUTOSCALE_FARO_EXACT_H
#define GANTRY_AUTOSCALE_FARO_EXACT_H

#include "scheduler/autoscale/faro_model.h"

#define FARO_EXACT_UNBOUNDED 0L

/* Writes the optimal counts into x and returns 0; -1 (x untouched) when the instance is not eligible or
 * the programme would take more than max_work cell updates (FARO_EXACT_UNBOUNDED: no limit).  For Fair
 * and FairSum, x on entry, when it is a solution (within bounds and budget), is the one to beat: the
 * bounds cut more from the start, and x stays when nothing is better.  Among equal Sum optima it takes the
 * one with the fewest slots. */
int faro_exact(const faro_job *jobs, int n, double budget, faro_objective obj, long max_work, int *x);

#endif
