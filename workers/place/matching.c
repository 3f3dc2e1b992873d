/* matching.c - greedy maximum-weight matching for favourite children.
 *
 * Weight of edge u -> v: its mean communication time c, scaled by how
 * critical the longest path through it is:
 *     w = c * (1 + (top(u) + time(u) + c + bottom(v)) / critical path)
 * so an edge on the critical path counts up to twice its communication
 * time and an edge far from it about once: zeroing communication where the
 * makespan is decided matters most (the LP does this implicitly by
 * minimising the makespan).  Ties: the longer path, then the edge order. */
#include "workers/place/matching.h"

#include "common/alloc.h"

#include <stdlib.h>

typedef struct ranked {
    double w, path;
    int edge;
} ranked;

static int cmp_ranked(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    if (x->w != y->w) return x->w > y->w ? -1 : 1;
    if (x->path != y->path) return x->path > y->path ? -1 : 1;
    return (x->edge > y->edge) - (x->edge < y->edge);
}

int place_favourites(const place_graph *g, const place_levels *lv, int *fav_child, int *fav_parent)
{
    for (int i = 0; i < g->n_ops; i++)
        fav_child[i] = fav_parent[i] = -1;
    if (g->n_edges == 0) return 0;
    ranked *r = xmalloc((size_t)g->n_edges * sizeof *r);
    double cp = lv->cp > 0 ? lv->cp : 1;
    for (int e = 0; e < g->n_edges; e++) {
        int u = g->edges[e].src, v = g->edges[e].dst;
        double c = place_levels_edge(lv, g, e);
        double path = lv->top[u] + place_levels_op(lv, g, u) + c + lv->bottom[v];
        r[e] = (ranked){c * (1 + path / cp), path, e};
    }
    qsort(r, (size_t)g->n_edges, sizeof *r, cmp_ranked);
    for (int i = 0; i < g->n_edges; i++) {
        int u = g->edges[r[i].edge].src, v = g->edges[r[i].edge].dst;
        if (fav_child[u] >= 0 || fav_parent[v] >= 0) continue;
        fav_child[u] = v;
        fav_parent[v] = u;
    }
    free(r);
    return 0;
}
