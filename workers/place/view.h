/* view.h - the graph the placement algorithms see, and the way back to the
 * user's ops.
 *
 * Owns: a derived graph (co-placement: the same ops in larger colocation
 * groups; fusion: ops merged along group-internal edges) and the member
 * lists of fused ops (place_view_clear).  Without either option the view is
 * the original graph itself.  Plans are made and simulated on the view;
 * place_view_expand maps a plan back to every original op. */
#ifndef GANTRY_PLACE_VIEW_H
#define GANTRY_PLACE_VIEW_H

#include <stddef.h>

#include "spec/place_graph.h"
#include "workers/place/plan.h"

typedef struct place_view {
    const place_graph *orig;
    place_graph *g;     /* derived graph; NULL when the algorithms see orig */
    int *off, *members; /* fused op i = original ops members[off[i] .. off[i+1]) in topological order; NULL without fusion */
    int *of;            /* original op -> fused op; NULL without fusion */
    int coplaced;       /* ops that joined a group by co-placement */
    int fused;          /* original ops merged into another (n_ops - fused ops) */
} place_view;

/* Builds the view; 0, or -1 with a message. */
int place_view_build(const place_graph *orig, int coplace, int fuse, place_view *v, char *msg, size_t len);
void place_view_clear(place_view *v);

static inline const place_graph *place_view_graph(const place_view *v)
{
    return v->g ? v->g : v->orig;
}

/* A plan on the view as a plan on the original ops (devices, order with
 * each fused op's members in a row, the transfer sequence); NULL when out
 * of memory. */
place_plan *place_view_expand(const place_view *v, const place_plan *vp);

/* Derived graphs (coplace.c, fuse.c): both return a new graph, or NULL
 * with a message.  Co-placement starts from the colocation groups and,
 * until nothing changes, puts an op whose out-edges all go to one consumer
 * in that consumer's group, unless the merged group would need more than a
 * quarter of the largest device (user groups are never split).  *joined
 * counts the ops that joined a group. */
place_graph *place_coplace(const place_graph *g, int *joined, char *msg, size_t len);
/* Fusion merges v into u along u -> v inside a group unless u has more than
 * one consumer and v more than one producer (fused ops as nodes), so no
 * cycle can form; off/members/of describe the result (fuse.c). */
place_graph *place_fuse(const place_graph *g, int **off, int **members, int **of, char *msg, size_t len);

#endif
