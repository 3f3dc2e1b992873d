/* matching.h - m-SCT's favourite children, by greedy matching.
 *
 * Owns nothing: fills two caller arrays.  Each op gets at most one
 * favourite child and at most one favourite parent, so the favourite pairs
 * form a matching of the bipartite graph (parents on one side, children on
 * the other, one side per edge).  Baechi finds them with an LP (minimise
 * the makespan with x_ij in [0, 1], favourite when x_ij <= 0.1) and needs a
 * commercial solver for it; we take the edges greedily by weight, heaviest
 * first, keeping an edge when both its ends are still free: O(E log E), a
 * 1/2-approximation of the maximum-weight matching. */
#ifndef GANTRY_PLACE_MATCHING_H
#define GANTRY_PLACE_MATCHING_H

#include "spec/place_graph.h"
#include "workers/place/levels.h"

/* fav_child[op] / fav_parent[op]: the op's partner or -1 (n_ops entries
 * each).  An edge's weight is its mean communication time, biased towards
 * the critical path (matching.c).  0, or -1 when out of memory. */
int place_favourites(const place_graph *g, const place_levels *lv, int *fav_child, int *fav_parent);

#endif
