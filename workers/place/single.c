/* single.c - the single-device candidate: every op on one device, the
 * fastest one that holds the whole graph (ties: the first listed).
 *
 * Placement papers often lose to one device (Baechi's GNMT plans were all
 * slower than one GPU), so the solver always weighs this plan too.  "Holds"
 * uses the same conservative charge as m-TOPO (persistent + output +
 * temporary of every op), so the two algorithms agree on what fits. */
#include "workers/place/algo.h"

#include <stdio.h>

int place_algo_single(const place_graph *g, place_plan *plan, char *reason, size_t reason_len)
{
    int64_t need = 0;
    for (int i = 0; i < g->n_ops; i++)
        need += place_op_memory(g, i);
    int best = -1, largest = 0;
    for (int d = 0; d < g->n_devices; d++) {
        const place_device *dev = &g->devices[d];
        if (dev->memory_bytes > g->devices[largest].memory_bytes) largest = d;
        if (dev->memory_bytes < need) continue;
        if (best < 0 || dev->speed > g->devices[best].speed) best = d;
    }
    if (best < 0) {
        int64_t cap = g->devices[largest].memory_bytes;
        snprintf(reason, reason_len, "all %d ops need %lld bytes but the largest device '%s' has %lld bytes (missing %lld bytes)",
                 g->n_ops, (long long)need, g->devices[largest].name, (long long)cap, (long long)(need - cap));
        return -1;
    }
    for (int t = 0; t < g->n_ops; t++) {
        plan->order[t] = g->topo[t];
        plan->device[t] = best;
    }
    return 0;
}
