/* topo.c - m-TOPO: walk ops in topological order and fill device 0, then
 * device 1, and so on, each up to its real memory capacity.
 *
 * Capacity is checked against the ledger's bound (ledger.h), with each
 * device running its ops in topological order, so a plan m-TOPO accepts
 * never runs out of memory in the simulator nor on the workers.
 * (Baechi caps each device at total/D plus the largest op instead, which
 * ignores the real capacity.)
 *
 * A colocation group is placed whole, on one device, when its first op comes
 * in the order.  When the unit (op or group) does not fit on the current
 * device we move on to the next device where it fits; a unit that fits on no
 * later device may still go to an earlier one with room, so m-TOPO only fails
 * when no device at all can take it, and then it says which op and how many
 * bytes are missing. */
#include "workers/place/algo.h"
#include "workers/place/groups.h"
#include "workers/place/ledger.h"

#include <stdio.h>

/* Places one unit: current device, later devices, then earlier ones. */
static int place_unit(const place_graph *g, place_ledger *led, place_plan *plan, int *cursor, const int *ops, int n, char *reason,
                      size_t len)
{
    int D = g->n_devices;
    place_miss miss = {.dev = -1};
    for (int i = 0; i < D; i++) {
        int dev = (*cursor + i) % D;
        int rc = place_ledger_try(led, ops, n, dev, &miss);
        if (rc < 0) return snprintf(reason, len, "out of memory"), -1;
        if (rc == 0) continue;
        place_ledger_commit(led);
        for (int k = 0; k < n; k++)
            plan->device[ops[k]] = dev;
        if (dev > *cursor) *cursor = dev;
        return 0;
    }
    place_miss_explain(g, ops, n, &miss, reason, len);
    return -1;
}

int place_algo_topo(const place_graph *g, place_plan *plan, char *reason, size_t reason_len)
{
    for (int i = 0; i < g->n_ops; i++)
        plan->device[i] = -1;
    place_groups gr = {0};
    place_ledger *led = place_ledger_new(g, plan->device);
    if (!led || place_groups_build(g, &gr) < 0) {
        place_ledger_free(led);
        snprintf(reason, reason_len, "out of memory");
        return -1;
    }
    int rc = 0, cursor = 0;
    for (int t = 0; t < g->n_ops && rc == 0; t++) {
        int op = g->topo[t], n;
        plan->order[t] = op;
        if (plan->device[op] < 0) { /* else placed with its group */
            const int *unit = place_unit_of(g, &gr, &g->topo[t], &n);
            rc = place_unit(g, led, plan, &cursor, unit, n, reason, reason_len);
        }
        if (rc == 0 && place_ledger_append(led, op) < 0) rc = -1, snprintf(reason, reason_len, "out of memory");
    }
    place_groups_clear(&gr);
    place_ledger_free(led);
    return rc;
}
