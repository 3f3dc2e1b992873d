/* faro.h - Faro's cluster-wide replica allocation (EuroSys'25), pure: the solvers of the
 * objectives of faro_model.h.
 *
 * Solver: an optimisation step chosen by faro_method, then, whatever the
 * method, shrink while the objective loses at most 1e-4 and hand out what is
 * left (one replica at a time to the job with the most load per replica).
 * FARO_GREEDY (derivative-free, on integer counts): start from the current
 * counts (trimmed to the budget), add the replica that helps the objective most
 * while the budget lasts, then move single replicas between jobs while a move
 * improves the objective.  Each candidate move is scored in O(1) from cached
 * per-job utilities and the three best / three worst utilities.
 * FARO_RELAXED (the paper's): the same moves on real counts (a compass search
 * on a lattice of 1/8 replica, the step halving from 2 replicas), then round
 * up, trim while over budget (the replica that hurts least), then the integer
 * moves from there.  FARO_EXACT: the optimum over integer counts
 * (faro_exact.h; where not eligible, the greedy step).  FARO_AUTO (the
 * default): up to 12 jobs (the paper's ten), the greedy solution improved to
 * the exact optimum (giving up after 10^6 programme cells); above, the better
 * of relaxed and greedy. */
#ifndef GANTRY_AUTOSCALE_FARO_H
#define GANTRY_AUTOSCALE_FARO_H

#include "scheduler/autoscale/faro_model.h"

typedef enum { FARO_AUTO, FARO_GREEDY, FARO_EXACT, FARO_RELAXED } faro_method;

/* Writes the replica counts into x (n entries); budget R in slots. Returns the
 * objective value the optimisation and the shrink reached (the hand-out of the
 * leftovers that follows is headroom and may lower it). */
double faro_solve_by(const faro_job *jobs, int n, double budget, faro_objective obj, faro_method method, int *x);
/* faro_solve_by with FARO_AUTO */
double faro_solve(const faro_job *jobs, int n, double budget, faro_objective obj, int *x);

/* Hierarchical: above group_size jobs, the jobs are cut into groups of similar
 * load, the budget is split between groups in proportion to their predicted
 * load (each group first gets its minimums), and each group is solved alone;
 * slots a group leaves go to the others.  At most group_size jobs: faro_solve. */
void faro_solve_grouped(const faro_job *jobs, int n, double budget, faro_objective obj, faro_method method, int group_size, int *x);

#endif
