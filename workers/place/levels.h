/* levels.h - path lengths through the graph: top and bottom levels, the
 * critical path, and the makespan lower bound.
 *
 * Owns: the arrays of a place_levels (place_levels_clear).  Levels price an
 * op at the devices' mean speed and an edge at the mean link (mean latency
 * + bytes x mean of 1 / bytes_per_us over all pairs of distinct devices;
 * no communication with one device), since placement is not known yet.
 * m-SCT ranks edges by them and uses bottom levels for urgency. */
#ifndef GANTRY_PLACE_LEVELS_H
#define GANTRY_PLACE_LEVELS_H

#include <stdint.h>

#include "spec/place_graph.h"

typedef struct place_levels {
    double *top;    /* per op: longest path from a source to the op's start */
    double *bottom; /* per op: longest path from the op's start to a sink's end */
    double cp;      /* critical path: max of top + bottom */
    double mean_latency, mean_inv_bw, mean_speed;
} place_levels;

/* 0, or -1 when out of memory. */
int place_levels_compute(const place_graph *g, place_levels *lv);
void place_levels_clear(place_levels *lv);

/* Mean time of an edge, and of an op, as levels price them. */
double place_levels_edge(const place_levels *lv, const place_graph *g, int edge);
double place_levels_op(const place_levels *lv, const place_graph *g, int op);

/* max(critical path of compute at the fastest device's speed, total compute
 * / total speed): no plan on these devices can be faster. */
double place_lower_bound_us(const place_graph *g);

#endif
