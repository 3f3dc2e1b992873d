/* plan.h - a placement plan: which device runs each op, and in what order.
 *
 * Owns: the two arrays of a place_plan (create/free pair).  Every placement
 * algorithm fills one; the simulator replays it; the solver turns it into
 * JSON.  The order is a permutation of all ops; ops that share a device run
 * there one at a time in the order they appear in it (workers follow it). */
#ifndef GANTRY_PLACE_PLAN_H
#define GANTRY_PLACE_PLAN_H

typedef struct place_plan {
    int n_ops;
    int *device; /* op -> device index, -1 while unplaced */
    int *order;  /* permutation of op indices */
} place_plan;

/* All ops unplaced, order = input order; NULL when out of memory. */
place_plan *place_plan_new(int n_ops);
void place_plan_free(place_plan *p);

#endif
