/* faro.h - Faro's cluster-wide replica allocation (EuroSys'25), pure.
 *
 * Utility of a job over a horizon of predicted rates: the sloppified
 * U = min(1, (T/L)^alpha) averaged over the horizon steps (L from latency.h).
 * A job scaling up is scored at its old count for the first step (cold start).
 * Objectives over replica counts x (Σ cost_i x_i <= R, min_i <= x_i <= max_i):
 *   SUM      max Σ w_i U_i
 *   FAIR     max -(max U - min U)            (ties broken by Σ U)
 *   FAIRSUM  max Σ U_i + N (min U - max U)
 * Solver (derivative-free, on integer counts): start from the current counts
 * (trimmed to the budget), add the replica that helps the objective most while
 * the budget lasts, then move single replicas between jobs while a move
 * improves the objective, shrink while the objective loses at most 1e-4, and
 * hand out what is left.  Each candidate move is scored in O(1) from cached
 * per-job utilities and the two best / two worst utilities, so 100 jobs take a
 * few milliseconds. */
#ifndef GANTRY_AUTOSCALE_FARO_H
#define GANTRY_AUTOSCALE_FARO_H

#define FARO_HORIZON 7 /* predicted minutes */

typedef enum { FARO_SUM, FARO_FAIR, FARO_FAIRSUM } faro_objective;

typedef struct {
    double p, slo_s, q, weight, cost; /* processing time, latency target, percentile, weight, slots per replica */
    int min, max;
    int current;               /* replicas now (ready + starting) */
    int nh;                    /* horizon steps used (1..FARO_HORIZON) */
    double rate[FARO_HORIZON]; /* predicted arrival rates (1/s) */
} faro_job;

/* the sloppified utility (alpha = 1) of one job with x replicas */
double faro_utility(const faro_job *j, int x);

/* Writes the replica counts into x (n entries); budget R in slots. Returns the
 * objective value reached. */
double faro_solve(const faro_job *jobs, int n, double budget, faro_objective obj, int *x);

/* Hierarchical: above group_size jobs, the jobs are cut into groups of similar
 * load, the budget is split between groups in proportion to their predicted
 * load (each group first gets its minimums), and each group is solved alone;
 * slots a group leaves go to the others.  At most group_size jobs: faro_solve. */
void faro_solve_grouped(const faro_job *jobs, int n, double budget, faro_objective obj, int group_size, int *x);

#endif
