/* groups.h - the members of each colocation group, in topological order.
 *
 * Owns: two CSR arrays (place_groups_clear releases them).  Every algorithm
 * that places a group whole when its first op comes (m-TOPO, m-ETF, m-SCT)
 * and fusion read the members from here. */
#ifndef GANTRY_PLACE_GROUPS_H
#define GANTRY_PLACE_GROUPS_H

#include "spec/place_graph.h"

typedef struct place_groups {
    int *off; /* n_groups + 1 entries */
    int *ops; /* members of group k: ops[off[k] .. off[k+1]) */
} place_groups;

/* 0, or -1 when out of memory (out is then cleared). */
int place_groups_build(const place_graph *g, place_groups *out);
void place_groups_clear(place_groups *gr);

/* The unit an op is placed with: its group's members, or the op alone. */
static inline const int *place_unit_of(const place_graph *g, const place_groups *gr, const int *op, int *n)
{
    int k = g->ops[*op].group;
    if (k < 0) {
        *n = 1;
        return op;
    }
    *n = gr->off[k + 1] - gr->off[k];
    return gr->ops + gr->off[k];
}

#endif
