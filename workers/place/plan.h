/* plan.h - a placement plan: which device runs each op, in what order, and
 * optionally in what order the channels carry the tensors.
 *
 * Owns: the arrays of a place_plan (create/free pair).  Every placement
 * algorithm fills one; the simulator replays it; the solver turns it into
 * JSON.  The order is a permutation of all ops; ops that share a device run
 * there one at a time in the order they appear in it (workers follow it).
 * A plan may also list its transfers (producer, receiving device) in one
 * global sequence: each send and each receive channel then serves its
 * transfers in that sequence, as the list schedulers planned them.  Without
 * it (n_xfers == 0) transfers go first come first served when their
 * producer ends (sim.h). */
#ifndef GANTRY_PLACE_PLAN_H
#define GANTRY_PLACE_PLAN_H

typedef struct place_plan {
    int n_ops;
    int *device; /* op -> device index, -1 while unplaced */
    int *order;  /* permutation of op indices */
    int n_xfers, cap_xfers;
    int *xfer_src, *xfer_dev; /* transfer k: op xfer_src[k]'s output to device xfer_dev[k] */
    char note[400];           /* how the plan was found, when not by the algorithm's plain pass; "" otherwise */
} place_plan;

/* All ops unplaced, order = input order, no transfer order; NULL when out
 * of memory. */
place_plan *place_plan_new(int n_ops);
void place_plan_free(place_plan *p);
/* Appends a transfer to the sequence; -1 when out of memory. */
int place_plan_add_xfer(place_plan *p, int src, int dev);
/* Forgets the transfer sequence (first come first served again). */
void place_plan_clear_xfers(place_plan *p);

#endif
