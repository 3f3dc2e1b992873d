/* single.c - the single-device candidate: every op on one device, the
 * fastest one that holds the whole graph (ties: the first listed).
 *
 * Placement papers often lose to one device (Baechi's GNMT plans were all
 * slower than one GPU), so the solver always weighs this plan too.  "Holds"
 * first uses the ledger's conservative charge (every op's memory as if all
 * were live at once, as m-TOPO does).  When no device holds that much, the
 * plan is replayed on each device, fastest first, and the first whose real
 * peak (outputs freed after their last consumer) fits is taken: one device
 * runs the ops in topological order with no transfers, so the replay is
 * exactly what that device will see. */
#include "workers/place/algo.h"

#include "common/alloc.h"
#include "workers/place/sim.h"

#include <stdio.h>
#include <stdlib.h>

static void all_on(const place_graph *g, place_plan *plan, int dev)
{
    for (int t = 0; t < g->n_ops; t++) {
        plan->order[t] = g->topo[t];
        plan->device[t] = dev;
    }
}

/* Devices by speed (fastest first), then input order. */
static int *by_speed(const place_graph *g)
{
    int *d = xmalloc((size_t)g->n_devices * sizeof *d);
    for (int i = 0; i < g->n_devices; i++) {
        int j = i;
        while (j > 0 && g->devices[d[j - 1]].speed < g->devices[i].speed)
            d[j] = d[j - 1], j--;
        d[j] = i;
    }
    return d;
}

/* The fastest device whose replayed peak fits; -1 when none, -2 when out
 * of memory; *peak gets the smallest peak seen. */
static int replay_fit(const place_graph *g, place_plan *plan, int64_t *peak)
{
    int *order = by_speed(g), found = -1;
    *peak = INT64_MAX;
    for (int i = 0; i < g->n_devices && found < 0; i++) {
        place_sim_result r;
        all_on(g, plan, order[i]);
        int rc = place_simulate(g, plan, &r);
        if (rc == 0 && r.peak_bytes[order[i]] < *peak) *peak = r.peak_bytes[order[i]];
        if (rc == 0 && r.feasible) found = order[i];
        place_sim_result_clear(&r);
        if (rc < 0) found = -2;
    }
    free(order);
    return found;
}

int place_algo_single(const place_graph *g, place_plan *plan, char *reason, size_t reason_len)
{
    int64_t need = 0, peak;
    for (int i = 0; i < g->n_ops; i++)
        need += place_op_memory(g, i);
    int best = -1, largest = 0;
    for (int d = 0; d < g->n_devices; d++) {
        const place_device *dev = &g->devices[d];
        if (dev->memory_bytes > g->devices[largest].memory_bytes) largest = d;
        if (dev->memory_bytes < need) continue;
        if (best < 0 || dev->speed > g->devices[best].speed) best = d;
    }
    if (best < 0) best = replay_fit(g, plan, &peak);
    if (best == -2) return snprintf(reason, reason_len, "out of memory"), -1;
    if (best < 0) {
        int64_t cap = g->devices[largest].memory_bytes;
        snprintf(reason, reason_len,
                 "all %d ops peak at %lld bytes on one device but the largest device '%s' has %lld bytes (missing %lld bytes)",
                 g->n_ops, (long long)peak, g->devices[largest].name, (long long)cap, (long long)(peak - cap));
        return -1;
    }
    all_on(g, plan, best);
    return 0;
}
