/* groups.c - colocation group members in topological order (CSR). */
#include "workers/place/groups.h"

#include "common/alloc.h"

#include <stdlib.h>

int place_groups_build(const place_graph *g, place_groups *out)
{
    out->off = xcalloc((size_t)g->n_groups + 1, sizeof *out->off);
    out->ops = xmalloc((size_t)(g->n_ops ? g->n_ops : 1) * sizeof *out->ops);
    int *fill = xcalloc((size_t)g->n_groups + 1, sizeof *fill);
    for (int i = 0; i < g->n_ops; i++)
        if (g->ops[i].group >= 0) out->off[g->ops[i].group + 1]++;
    for (int k = 0; k < g->n_groups; k++)
        out->off[k + 1] += out->off[k];
    for (int t = 0; t < g->n_ops; t++) {
        int op = g->topo[t], k = g->ops[op].group;
        if (k >= 0) out->ops[out->off[k] + fill[k]++] = op;
    }
    free(fill);
    return 0;
}

void place_groups_clear(place_groups *gr)
{
    free(gr->off);
    free(gr->ops);
    gr->off = gr->ops = NULL;
}
